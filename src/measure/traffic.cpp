#include "measure/traffic.h"

#include <algorithm>

#include "core/error.h"

namespace tokenmill {

namespace {

uint64_t bytes_of(const Tensor& t) { return t.data != nullptr ? t.nbytes() : 0; }

}  // namespace

WeightTraffic weight_traffic(const Model& model, DType kv_dtype) {
  const ModelWeights& w = model.weights;
  WeightTraffic traffic;
  for (const LayerWeights& l : w.layers) {
    for_each_layer_tensor(l, [&](const Tensor& t) { traffic.layer_bytes += bytes_of(t); });
    uint64_t experts = 0;  // every expert's matrices and biases: a token reads its chosen experts' only
    for (const Tensor* t : {&l.expert_gate, &l.expert_up, &l.expert_down, &l.expert_gate_bias,
                            &l.expert_up_bias, &l.expert_down_bias})
      experts += bytes_of(*t);
    traffic.layer_bytes -= experts;
    if (model.config.mixture_of_experts()) traffic.expert_bytes += experts / model.config.num_experts;
  }
  traffic.experts = model.config.num_experts;
  traffic.experts_per_token = model.config.experts_per_token;
  traffic.logits_bytes = bytes_of(w.final_norm_weight) + bytes_of(w.final_norm_bias) + bytes_of(w.lm_head);
  const auto row_bytes = [](const Tensor& table) {
    return table.data != nullptr ? dtype_row_bytes(table.dtype, table.cols()) : 0;
  };
  traffic.embedding_row_bytes = row_bytes(w.token_embedding) + row_bytes(w.position_embedding);
  traffic.kv_bytes_per_position =
      static_cast<uint64_t>(model.config.kv_floats_per_token()) * dtype_size(kv_dtype);
  return traffic;
}

void ExpertReads::count(const ExpertRouting& routing) {
  for (int64_t e = 0; e < routing.experts; ++e)
    layer_experts +=
        routing.expert_begin[static_cast<size_t>(e) + 1] > routing.expert_begin[static_cast<size_t>(e)];
}

WeightTraffic traffic_without_experts(WeightTraffic traffic) {
  traffic.expert_bytes = 0;
  return traffic;
}

double routed_expert_bytes(const WeightTraffic& traffic, const ExpertReads& reads, int64_t layers) {
  return static_cast<double>(traffic.expert_bytes) * static_cast<double>(reads.layer_experts) /
         static_cast<double>(layers);
}

double step_layer_bytes(const WeightTraffic& traffic, int64_t tokens) {
  const int64_t experts_read = std::min(traffic.experts, tokens * traffic.experts_per_token);
  return static_cast<double>(traffic.layer_bytes) +
         static_cast<double>(traffic.expert_bytes) * static_cast<double>(experts_read);
}

double forward_bytes(const WeightTraffic& traffic, int64_t first_position, int64_t tokens, int64_t chunk) {
  if (tokens < 1 || chunk < 1 || first_position < 0)
    fail("forward_bytes: needs tokens >= 1, chunk >= 1, first_position >= 0 (got {}, {}, {})", tokens, chunk,
         first_position);
  double bytes = static_cast<double>(traffic.logits_bytes) +
                 static_cast<double>(traffic.embedding_row_bytes) * static_cast<double>(tokens);
  for (int64_t begin = 0; begin < tokens; begin += chunk) {
    const int64_t end = first_position + std::min(tokens, begin + chunk);
    bytes += step_layer_bytes(traffic, std::min(chunk, tokens - begin)) +
             static_cast<double>(traffic.kv_bytes_per_position) * static_cast<double>(end);
  }
  return bytes;
}

double batched_decode_bytes(const WeightTraffic& traffic, int64_t position, int64_t batch) {
  if (batch < 1 || position < 0)
    fail("batched_decode_bytes: needs batch >= 1, position >= 0 (got {}, {})", batch, position);
  const double per_sequence =
      static_cast<double>(traffic.embedding_row_bytes) +
      static_cast<double>(traffic.kv_bytes_per_position) * static_cast<double>(position + 1);
  return step_layer_bytes(traffic, batch) + static_cast<double>(traffic.logits_bytes) +
         per_sequence * static_cast<double>(batch);
}

double training_step_bytes(int64_t parameters) {
  if (parameters < 1) fail("training_step_bytes: needs parameters >= 1 (got {})", parameters);
  return 7.0 * sizeof(float) * static_cast<double>(parameters);
}

}  // namespace tokenmill
