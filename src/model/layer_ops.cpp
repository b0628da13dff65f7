#include "model/layer_ops.h"

#include "core/checked_math.h"
#include "model/norm.h"
#include "model/rope.h"

namespace tokenmill {

size_t StepBuffers::bytes(const ModelConfig& c, int64_t rows) {
  const int64_t q_width = c.num_attention_heads * c.head_dim;
  const int64_t kv_width = c.num_key_value_heads * c.head_dim;
  const int64_t widths[] = {
      c.hidden_size, c.hidden_size,       c.hidden_size,      q_width, q_width, kv_width,
      kv_width,      c.intermediate_size, c.intermediate_size};
  size_t total = Arena::footprint(static_cast<size_t>(c.head_dim / 2) * sizeof(float));
  for (int64_t w : widths)
    total += Arena::footprint(static_cast<size_t>(
        checked_mul(checked_mul(static_cast<uint64_t>(rows), static_cast<uint64_t>(w), "step activations"),
                    sizeof(float), "step activations")));
  return total;
}

StepBuffers StepBuffers::allocate(Arena& arena, const Model& model, int64_t rows) {
  const ModelConfig& c = model.config;
  const int64_t q_width = c.num_attention_heads * c.head_dim;
  const int64_t kv_width = c.num_key_value_heads * c.head_dim;
  StepBuffers b;
  if (c.positions == PositionKind::Rotary) {
    const std::vector<float> inv_freq = model_rope_frequencies(c, model.weights);
    b.inv_freq = arena.allocate(DType::F32, {c.head_dim / 2});
    arena.memory().copy_from_host(b.inv_freq.data, inv_freq.data(), b.inv_freq.nbytes());
  }
  b.residual = arena.allocate(DType::F32, {rows, c.hidden_size});
  b.normed = arena.allocate(DType::F32, {rows, c.hidden_size});
  b.projected = arena.allocate(DType::F32, {rows, c.hidden_size});
  b.query = arena.allocate(DType::F32, {rows, q_width});
  b.attended = arena.allocate(DType::F32, {rows, q_width});
  b.new_keys = arena.allocate(DType::F32, {rows, kv_width});
  b.new_values = arena.allocate(DType::F32, {rows, kv_width});
  b.mlp_a = arena.allocate(DType::F32, {rows, c.intermediate_size});
  b.mlp_b = arena.allocate(DType::F32, {rows, c.intermediate_size});
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
}

void mlp_delta(Backend& backend, const Model& model, const LayerWeights& w, const Tensor& x, const Tensor& h,
               const Tensor& a, const Tensor& b, const Tensor& delta) {
  const ModelConfig& c = model.config;
  const Tensor& input = block_input(backend, c, x, &delta, w.mlp_norm_weight, w.mlp_norm_bias, h);
  if (c.mlp == MlpKind::SwiGlu) {
    const Backend::MatmulTarget gate_up[] = {{&w.gate, optional_tensor(w.gate_bias), &a},
                                             {&w.up, optional_tensor(w.up_bias), &b}};
    backend.matmul_shared(input, gate_up);
    backend.swiglu(a, b, a);
  } else {
    backend.matmul(input, w.up, optional_tensor(w.up_bias), a);
    backend.gelu(a, c.mlp == MlpKind::GeluTanh ? GeluForm::Tanh : GeluForm::Erf, a);
  }
  backend.matmul(a, w.down, optional_tensor(w.down_bias), delta);
  if (c.post_norms) apply_norm(backend, c, delta, w.mlp_norm_weight, w.mlp_norm_bias, delta);
}

void add_final_norm(Backend& backend, const Model& model, const Tensor& x, const Tensor& delta,
                    const Tensor& out) {
  const ModelWeights& w = model.weights;
  apply_add_norm(backend, model.config, x, delta, x, w.final_norm_weight, w.final_norm_bias, out);
}

}  // namespace tokenmill
