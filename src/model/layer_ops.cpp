#include "model/layer_ops.h"

#include <cmath>

#include "core/checked_math.h"
#include "model/norm.h"
#include "model/rope.h"

namespace tokenmill {

namespace {

// The step's buffers as [rows, width] pairs, in allocation order (the residual stream
// first), after the rotary frequencies.
struct BufferShape {
  Tensor StepBuffers::*field;
  int64_t rows, width;
};

std::vector<BufferShape> buffer_shapes(const ModelConfig& c, int64_t rows) {
  const int64_t q_width = c.num_attention_heads * c.head_dim;
  const int64_t kv_width = c.num_key_value_heads * c.head_dim;
  const int64_t mlp_rows = c.mixture_of_experts() ? rows * c.experts_per_token : rows;
  std::vector<BufferShape> shapes = {
      {&StepBuffers::residual, rows, c.hidden_size},  {&StepBuffers::normed, rows, c.hidden_size},
      {&StepBuffers::projected, rows, c.hidden_size}, {&StepBuffers::query, rows, q_width},
      {&StepBuffers::attended, rows, q_width},        {&StepBuffers::new_keys, rows, kv_width},
      {&StepBuffers::new_values, rows, kv_width},     {&StepBuffers::mlp_a, mlp_rows, c.mlp_width()},
      {&StepBuffers::mlp_b, mlp_rows, c.mlp_width()}};
  if (c.mixture_of_experts()) {
    shapes.push_back({&StepBuffers::router_scores, rows, c.num_experts});
    shapes.push_back({&StepBuffers::expert_inputs, mlp_rows, c.hidden_size});
    shapes.push_back({&StepBuffers::expert_outputs, mlp_rows, c.hidden_size});
  }
  return shapes;
}

}  // namespace

size_t StepBuffers::bytes(const ModelConfig& c, int64_t rows) {
  const size_t frequencies = Arena::footprint(static_cast<size_t>(c.rotary_dim / 2) * sizeof(float));
  size_t total = c.sliding_rope_theta > 0 ? 2 * frequencies : frequencies;
  for (const BufferShape& s : buffer_shapes(c, rows))
    total += Arena::footprint(static_cast<size_t>(checked_mul(
        checked_mul(static_cast<uint64_t>(s.rows), static_cast<uint64_t>(s.width), "step activations"),
        sizeof(float), "step activations")));
  return total;
}

StepBuffers StepBuffers::allocate(Arena& arena, const Model& model, int64_t rows, int64_t context) {
  const ModelConfig& c = model.config;
  StepBuffers b;
  if (c.positions == PositionKind::Rotary) {
    const RopeFrequencies frequencies = model_rope_frequencies(c, model.weights, context);
    const auto upload = [&](const std::vector<float>& values) {
      Tensor t = arena.allocate(DType::F32, {std::ssize(values)});
      arena.memory().copy_from_host(t.data, values.data(), t.nbytes());
      return t;
    };
    b.inv_freq = upload(frequencies.global);
    if (!frequencies.sliding.empty()) b.sliding_inv_freq = upload(frequencies.sliding);
  }
  for (const BufferShape& s : buffer_shapes(c, rows))
    b.*s.field = arena.allocate(DType::F32, {s.rows, s.width});
  if (c.mixture_of_experts() && !arena.memory().is_host())
    b.experts.host_scores.reserve(static_cast<size_t>(rows * c.num_experts));
  return b;
}

void embed_tokens(Backend& backend, const ModelConfig& config, const ModelWeights& weights,
                  std::span<const int32_t> ids, std::span<const int32_t> positions, const Tensor& x,
                  const Tensor& scratch) {
  backend.embedding(weights.token_embedding, ids, x);
  // In f32, as transformers computes it in the engine's f32 (its bf16 run rounds sqrt(hidden) to bf16).
  if (config.scale_embeddings)
    backend.scale(x, static_cast<float>(std::sqrt(static_cast<double>(config.hidden_size))), x);
  if (config.positions == PositionKind::Learned) {
    backend.embedding(weights.position_embedding, positions, scratch);
    backend.add(x, scratch, x);
  }
}

LayerTensors step_layer_tensors(const ModelConfig& c, const StepBuffers& b, int64_t n) {
  LayerTensors t;
  t.x = t.mid = b.residual.slice_rows(0, n);
  t.h1 = t.h2 = b.normed.slice_rows(0, n);
  t.q = t.q_raw = b.query.slice_rows(0, n).reshaped({n, c.num_attention_heads, c.head_dim});
  t.k = t.k_raw = b.new_keys.slice_rows(0, n).reshaped({n, c.num_key_value_heads, c.head_dim});
  t.v = b.new_values.slice_rows(0, n).reshaped({n, c.num_key_value_heads, c.head_dim});
  t.attended = b.attended.slice_rows(0, n).reshaped({n, c.num_attention_heads, c.head_dim});
  t.o = t.o_raw = t.delta = t.down_raw = b.projected.slice_rows(0, n);
  t.a = t.act = b.mlp_a.slice_rows(0, n);
  t.b = b.mlp_b.slice_rows(0, n);
  return t;
}

void StepHooks::project(int64_t, const Tensor& x, std::span<const Projection> projections) {
  if (projections.size() == 1) {
    const Projection& p = projections.front();
    backend_.matmul(x, *p.w, p.bias, *p.y);
    return;
  }
  std::array<Backend::MatmulTarget, 3> targets;
  if (projections.size() > targets.size()) fail("a layer projects one input at most 3 ways");
  for (size_t i = 0; i < projections.size(); ++i)
    targets[i] = {projections[i].w, projections[i].bias, projections[i].y};
  backend_.matmul_shared(x, std::span(targets.data(), projections.size()));
}

void StepHooks::experts(int64_t, const LayerWeights& w, const Tensor& h, const Tensor& delta) {
  StepBuffers& b = buffers_;
  const int64_t n = h.rows(), slots = n * config_.experts_per_token;
  const Tensor a = b.mlp_a.slice_rows(0, slots);
  experts_forward(backend_, config_, w, h,
                  {.scores = b.router_scores.slice_rows(0, n),
                   .inputs = b.expert_inputs.slice_rows(0, slots),
                   .gate = a,
                   .up = b.mlp_b.slice_rows(0, slots),
                   .act = a,
                   .outputs = b.expert_outputs.slice_rows(0, slots),
                   .delta = delta},
                  b.experts);
  if (b.routing_observer) b.routing_observer(b.experts.routing);
}

void output_logits(Backend& backend, const ModelConfig& config, const ModelWeights& weights,
                   const Tensor& normed, const Tensor& logits) {
  backend.matmul(normed, weights.lm_head, nullptr, logits);
  if (const double cap = config.final_logit_softcapping; cap > 0)
    backend.softcap(logits, static_cast<float>(cap), logits);
}

void add_final_norm(Backend& backend, const Model& model, const Tensor& x, const Tensor& delta,
                    const Tensor& out) {
  const ModelWeights& w = model.weights;
  apply_add_norm(backend, model.config, x, delta, x, w.final_norm_weight, w.final_norm_bias, out);
}

}  // namespace tokenmill
