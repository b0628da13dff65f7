#include "model/weights.h"

#include <string>

#include "core/transpose.h"
#include "model/weight_placement.h"
#include "model/weight_source.h"

namespace tokenmill {

namespace {

class SafetensorsSource final : public WeightSource {
 public:
  SafetensorsSource(const SafetensorsArchive& archive, TensorStore& store, bool transposed_linears)
      : archive_(archive), store_(store), transposed_linears_(transposed_linears) {}

  bool has(const std::string& name) const override { return archive_.contains(name); }

  Tensor matrix(const std::string& name, int64_t rows, int64_t cols) const override {
    return archive_.tensor(name, {rows, cols});
  }

  // GPT-2's Conv1D weights are stored [in, out]: transposed into a copy in their own dtype.
  Tensor linear(const std::string& name, int64_t out, int64_t in) const override {
    if (!transposed_linears_) return matrix(name, out, in);
    const Tensor stored = archive_.tensor(name, {in, out});
    Tensor t = store_.allocate(stored.dtype, {out, in});
    transpose(stored.data, in, out, dtype_size(stored.dtype), t.data);
    return t;
  }

  // Hugging Face keeps a Linear per expert: copied into one stack.
  Tensor experts(const std::string& name, int64_t count, int64_t rows, int64_t cols) const override {
    const auto names = [&](int64_t e) { return expert_name(name, e); };
    return stack_experts(
        store_, count,
        [&](int64_t e) {
          return archive_.tensor(names(e), {rows, cols});
        },
        names);
  }

  // Hugging Face keeps a Linear per expert: their biases copied into one stack.
  Tensor expert_biases(const std::string& name, int64_t count, int64_t rows) const override {
    Tensor out = store_.allocate(DType::F32, {count * rows});
    for (int64_t e = 0; e < count; ++e) {
      const Tensor stored = archive_.tensor(expert_name(name, e), {rows});
      for (int64_t i = 0; i < rows; ++i)
        out.as<float>()[e * rows + i] = load_as_f32(stored.data, stored.dtype, static_cast<size_t>(i));
    }
    return out;
  }

  Tensor vector_f32(const std::string& name, int64_t n) const override {
    const Tensor stored = archive_.tensor(name, {n});
    Tensor out = store_.allocate(DType::F32, {n});
    for (int64_t i = 0; i < n; ++i)
      out.as<float>()[i] = load_as_f32(stored.data, stored.dtype, static_cast<size_t>(i));
    return out;
  }

  ExpertStacks fused_experts(const std::string& module, int64_t count, int64_t width,
                             int64_t hidden) const override {
    return read_fused_experts(archive_, store_, module, count, width, hidden);
  }

 private:
  const SafetensorsArchive& archive_;
  TensorStore& store_;
  bool transposed_linears_;
};

// Bytes per 32 expert weights as the load stacks them: MXFP4 blocks for gpt-oss's MXFP4
// checkpoints, else the stored dtype's (f32 when unknown).
uint64_t stored_expert_bytes(const TensorLayout& layout, const SafetensorsArchive& archive) {
  std::optional<StoredTensor> stored;
  if (!layout.hf_fused_experts.empty()) {
    const std::string module =
        layer_module_name(layout, WeightFormat::HuggingFace, 0, {layout.hf_fused_experts, {}});
    if (archive.contains(module + ".gate_up_proj_blocks")) return dtype_block_bytes(DType::MXFP4);
    stored = archive.find(module + ".gate_up_proj");
  } else {
    const std::string first = layer_module_name(layout, WeightFormat::HuggingFace, 0, layout.expert_gate);
    stored = archive.find(expert_name(first, 0) + ".weight");
  }
  return 32 * (stored && stored->entry->dtype ? dtype_size(*stored->entry->dtype) : sizeof(float));
}

}  // namespace

void load_weights(const ModelConfig& config, const SafetensorsArchive& archive, ModelWeights& weights) {
  const TensorLayout& layout = tensor_layout(config);
  if (config.mixture_of_experts()) {  // the experts are copied into one stack per layer: room first
    const uint64_t weights_per_projection = static_cast<uint64_t>(
        config.num_hidden_layers * config.num_experts * config.hidden_size * config.expert_intermediate_size);
    check_room_for(host_memory(), 3 * weights_per_projection * stored_expert_bytes(layout, archive) / 32,
                   "the experts' weights, stacked in memory at load,");
  }
  const SafetensorsSource source(archive, weights.owned, layout.hf_transposed_linears);
  load_layout_weights(config, source, WeightFormat::HuggingFace, weights);
}

ModelWeights view_weights(const ModelWeights& w) {
  ModelWeights v;
  v.token_embedding = w.token_embedding;
  v.position_embedding = w.position_embedding;
  v.layers = w.layers;
  v.final_norm_weight = w.final_norm_weight;
  v.final_norm_bias = w.final_norm_bias;
  v.lm_head = w.lm_head;
  v.rope_freq_factors = w.rope_freq_factors;
  v.memory = w.memory;
  return v;
}

}  // namespace tokenmill
