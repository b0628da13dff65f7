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
  const size_t frequencies = Arena::footprint(static_cast<size_t>(c.head_dim / 2) * sizeof(float));
  size_t total = c.sliding_rope_theta > 0 ? 2 * frequencies : frequencies;
  for (const BufferShape& s : buffer_shapes(c, rows))
    total += Arena::footprint(static_cast<size_t>(checked_mul(
        checked_mul(static_cast<uint64_t>(s.rows), static_cast<uint64_t>(s.width), "step activations"),
        sizeof(float), "step activations")));
  return total;
}

StepBuffers StepBuffers::allocate(Arena& arena, const Model& model, int64_t rows) {
  const ModelConfig& c = model.config;
  StepBuffers b;
  if (c.positions == PositionKind::Rotary) {
    const std::vector<float> inv_freq = model_rope_frequencies(c, model.weights);
    b.inv_freq = arena.allocate(DType::F32, {c.head_dim / 2});
    arena.memory().copy_from_host(b.inv_freq.data, inv_freq.data(), b.inv_freq.nbytes());
    if (c.sliding_rope_theta > 0) {
      const std::vector<float> sliding =
          rope_inverse_frequencies(RopeScaling{}, c.sliding_rope_theta, c.head_dim);
      b.sliding_inv_freq = arena.allocate(DType::F32, {c.head_dim / 2});
      arena.memory().copy_from_host(b.sliding_inv_freq.data, sliding.data(), b.sliding_inv_freq.nbytes());
    }
  }
  for (const BufferShape& s : buffer_shapes(c, rows))
    b.*s.field = arena.allocate(DType::F32, {s.rows, s.width});
  if (c.mixture_of_experts() && !arena.memory().is_host())
    b.host_scores.resize(static_cast<size_t>(rows * c.num_experts));
  return b;
}

namespace {

// x += delta (when given); returns the block's input: norm(x), written to h, or with
// post-norms x itself (the block's output is normalised instead).
const Tensor& block_input(Backend& backend, const ModelConfig& c, const Tensor& x, const Tensor* delta,
                          const Tensor& weight, const Tensor& bias, const Tensor& h) {
  if (c.post_norms) {
    if (delta != nullptr) backend.add(x, *delta, x);
    return x;
  }
  if (delta != nullptr) {
    apply_add_norm(backend, c, x, *delta, x, weight, bias, h);
  } else {
    apply_norm(backend, c, x, weight, bias, h);
  }
  return h;
}

}  // namespace

void embed_tokens(Backend& backend, const Model& model, std::span<const int32_t> ids,
                  std::span<const int32_t> positions, const Tensor& x, const Tensor& scratch) {
  backend.embedding(model.weights.token_embedding, ids, x);
  // In f32, as transformers computes it in the engine's f32 (its bf16 run rounds sqrt(hidden) to bf16).
  if (model.config.scale_embeddings)
    backend.scale(x, static_cast<float>(std::sqrt(static_cast<double>(model.config.hidden_size))), x);
  if (model.config.positions == PositionKind::Learned) {
    backend.embedding(model.weights.position_embedding, positions, scratch);
    backend.add(x, scratch, x);
  }
}

void attention_inputs(Backend& backend, const Model& model, const LayerWeights& w, const Tensor& x,
                      const Tensor* delta, const Tensor& h, const Tensor& q, const Tensor& k, const Tensor& v,
                      std::span<const int32_t> positions, const Tensor& inv_freq) {
  const ModelConfig& c = model.config;
  const int64_t n = x.rows();
  const int64_t kv_width = c.num_key_value_heads * c.head_dim;
  const Tensor& input = block_input(backend, c, x, delta, w.attn_norm_weight, w.attn_norm_bias, h);
  const Tensor q_rows = q.reshaped({n, c.num_attention_heads * c.head_dim});
  const Tensor k_rows = k.reshaped({n, kv_width}), v_rows = v.reshaped({n, kv_width});
  const Backend::MatmulTarget qkv[] = {{&w.q, optional_tensor(w.q_bias), &q_rows},
                                       {&w.k, optional_tensor(w.k_bias), &k_rows},
                                       {&w.v, optional_tensor(w.v_bias), &v_rows}};
  backend.matmul_shared(input, qkv);
  if (c.qk_norm != QkNorm::None) {  // in place, over rows of q_norm_width() / k_norm_width()
    const auto eps = static_cast<float>(c.norm_eps);
    const Tensor q_parts = q.reshaped({q.numel() / c.q_norm_width(), c.q_norm_width()});
    const Tensor k_parts = k.reshaped({k.numel() / c.k_norm_width(), c.k_norm_width()});
    backend.rms_norm(q_parts, w.q_norm_weight, eps, q_parts);
    backend.rms_norm(k_parts, w.k_norm_weight, eps, k_parts);
  }
  if (c.positions == PositionKind::Rotary) {
    backend.rope(q, positions, inv_freq, c.rope_layout);
    backend.rope(k, positions, inv_freq, c.rope_layout);
  }
}

void attention_delta(Backend& backend, const Model& model, const LayerWeights& w, const Tensor& attended,
                     const Tensor& delta) {
  backend.matmul(attended, w.o, optional_tensor(w.o_bias), delta);
  if (model.config.post_norms)
    apply_norm(backend, model.config, delta, w.attn_norm_weight, w.attn_norm_bias, delta);
  if (model.config.sandwich_norms)
    apply_norm(backend, model.config, delta, w.attn_post_norm_weight, Tensor{}, delta);
}

namespace {

// matmul_many over `operands` ([x, w, y] each, no bias), `products` its scratch.
void run_products(Backend& backend, const std::vector<std::array<Tensor, 3>>& operands,
                  std::vector<Backend::MatmulProduct>& products) {
  products.clear();
  for (const auto& [x, w, y] : operands) products.push_back({&x, &w, nullptr, &y});
  backend.matmul_many(products);
}

// delta = sum_j weight_j SwiGLU_{expert_j}(h) of every row of h [n, hidden] (mlp_delta).
void experts_delta(Backend& backend, const ModelConfig& c, const LayerWeights& w, const Tensor& h,
                   StepBuffers& b, const Tensor& delta) {
  const int64_t n = h.rows(), slots = n * c.experts_per_token;
  const Tensor scores = b.router_scores.slice_rows(0, n);
  backend.matmul(h, w.router, nullptr, scores);
  std::span<const float> host_scores(scores.as<const float>(), static_cast<size_t>(scores.numel()));
  if (!b.host_scores.empty()) {  // backend memory the host cannot read
    backend.memory().copy_to_host(b.host_scores.data(), scores.data, scores.nbytes());
    host_scores = std::span<const float>(b.host_scores).first(static_cast<size_t>(scores.numel()));
  }
  ExpertRouting& r = b.routing;
  route_to_experts(host_scores, n, c.num_experts, c.experts_per_token, c.normalize_expert_weights, r);
  if (b.routing_observer) b.routing_observer(r);
  const Tensor inputs = b.expert_inputs.slice_rows(0, slots), outputs = b.expert_outputs.slice_rows(0, slots);
  const Tensor a = b.mlp_a.slice_rows(0, slots), up = b.mlp_b.slice_rows(0, slots);
  backend.embedding(h, r.slot_tokens, inputs);  // each expert's tokens together
  // The chosen experts' slices: [x, w, y] per projection; the others' weights are not read.
  std::vector<std::array<Tensor, 3>>& gate_up = b.expert_operands[0];
  std::vector<std::array<Tensor, 3>>& down = b.expert_operands[1];
  gate_up.clear();
  down.clear();
  for (int64_t e = 0; e < c.num_experts; ++e) {
    const int64_t first = r.expert_begin[static_cast<size_t>(e)];
    const int64_t count = r.expert_begin[static_cast<size_t>(e) + 1] - first;
    if (count == 0) continue;
    const Tensor x = inputs.slice_rows(first, count), act = a.slice_rows(first, count);
    gate_up.push_back({x, expert_matrix(w.expert_gate, e, c.num_experts), act});
    gate_up.push_back({x, expert_matrix(w.expert_up, e, c.num_experts), up.slice_rows(first, count)});
    down.push_back({act, expert_matrix(w.expert_down, e, c.num_experts), outputs.slice_rows(first, count)});
  }
  run_products(backend, gate_up, b.products);
  backend.swiglu(a, up, a);  // every slot at once
  run_products(backend, down, b.products);
  backend.combine_rows(outputs, r.slots, r.weights, delta);
}

}  // namespace

void mlp_delta(Backend& backend, const Model& model, const LayerWeights& w, StepBuffers& buffers, int64_t n) {
  const ModelConfig& c = model.config;
  const Tensor x = buffers.residual.slice_rows(0, n), delta = buffers.projected.slice_rows(0, n);
  const Tensor h = buffers.normed.slice_rows(0, n);
  const Tensor& input = block_input(backend, c, x, &delta, w.mlp_norm_weight, w.mlp_norm_bias, h);
  if (c.mixture_of_experts()) {
    experts_delta(backend, c, w, input, buffers, delta);
    return;
  }
  const Tensor a = buffers.mlp_a.slice_rows(0, n), b = buffers.mlp_b.slice_rows(0, n);
  if (gated_mlp(c.mlp)) {
    const Backend::MatmulTarget gate_up[] = {{&w.gate, optional_tensor(w.gate_bias), &a},
                                             {&w.up, optional_tensor(w.up_bias), &b}};
    backend.matmul_shared(input, gate_up);
    if (c.mlp == MlpKind::GeGlu) {
      backend.geglu(a, b, a);
    } else {
      backend.swiglu(a, b, a);
    }
  } else {
    backend.matmul(input, w.up, optional_tensor(w.up_bias), a);
    backend.gelu(a, c.mlp == MlpKind::GeluTanh ? GeluForm::Tanh : GeluForm::Erf, a);
  }
  backend.matmul(a, w.down, optional_tensor(w.down_bias), delta);
  if (c.post_norms) apply_norm(backend, c, delta, w.mlp_norm_weight, w.mlp_norm_bias, delta);
  if (c.sandwich_norms) apply_norm(backend, c, delta, w.mlp_post_norm_weight, Tensor{}, delta);
}

void output_logits(Backend& backend, const Model& model, const Tensor& normed, const Tensor& logits) {
  backend.matmul(normed, model.weights.lm_head, nullptr, logits);
  if (const double cap = model.config.final_logit_softcapping; cap > 0)
    backend.softcap(logits, static_cast<float>(cap), logits);
}

void add_final_norm(Backend& backend, const Model& model, const Tensor& x, const Tensor& delta,
                    const Tensor& out) {
  const ModelWeights& w = model.weights;
  apply_add_norm(backend, model.config, x, delta, x, w.final_norm_weight, w.final_norm_bias, out);
}

}  // namespace tokenmill
