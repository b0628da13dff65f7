#include "model/transformer.h"

#include <algorithm>
#include <cmath>

#include "model/norm.h"
#include "model/rope.h"

namespace tokenmill {

namespace {

// Bytes of the activation arena: one footprint per buffer allocated in the constructor.
size_t activation_bytes(const ModelConfig& c, int64_t chunk) {
  const int64_t q_width = c.num_attention_heads * c.head_dim;
  const int64_t kv_width = c.num_key_value_heads * c.head_dim;
  const int64_t widths[] = {c.head_dim / 2,
                            chunk * c.hidden_size,
                            chunk * c.hidden_size,
                            chunk * q_width,
                            chunk * q_width,
                            chunk * c.hidden_size,
                            chunk * c.intermediate_size,
                            chunk * c.intermediate_size,
                            chunk * c.vocab_size,
                            chunk * kv_width,
                            chunk * kv_width};
  size_t total = 0;
  for (int64_t w : widths) total += Arena::footprint(static_cast<size_t>(w) * sizeof(float));
  return total;
}

}  // namespace

Transformer::Transformer(const Model& model, Backend& backend, int64_t context, int64_t chunk_tokens,
                         std::optional<DType> kv_dtype)
    : model_(model),
      config_(model.config),
      backend_(backend),
      context_(context > 0 ? std::min(context, model.config.context_length())
                           : model.config.context_length()),
      chunk_(std::max<int64_t>(1, std::min(chunk_tokens, context_))),
      cache_(model.config, context_, kv_dtype.value_or(model.default_kv_dtype())),
      arena_(activation_bytes(model.config, chunk_)) {
  const ModelConfig& c = config_;
  const int64_t q_width = c.num_attention_heads * c.head_dim;
  if (c.positions == PositionKind::Rotary) {
    inv_freq_ = model_rope_frequencies(c, model.weights);
    inv_freq_tensor_ = arena_.allocate(DType::F32, {c.head_dim / 2});
    std::copy(inv_freq_.begin(), inv_freq_.end(), inv_freq_tensor_.as<float>());
  }
  residual_ = arena_.allocate(DType::F32, {chunk_, c.hidden_size});
  normed_ = arena_.allocate(DType::F32, {chunk_, c.hidden_size});
  query_ = arena_.allocate(DType::F32, {chunk_, q_width});
  attended_ = arena_.allocate(DType::F32, {chunk_, q_width});
  projected_ = arena_.allocate(DType::F32, {chunk_, c.hidden_size});
  mlp_a_ = arena_.allocate(DType::F32, {chunk_, c.intermediate_size});
  mlp_b_ = arena_.allocate(DType::F32, {chunk_, c.intermediate_size});
  logits_ = arena_.allocate(DType::F32, {chunk_, c.vocab_size});
  const int64_t kv_width = c.num_key_value_heads * c.head_dim;
  new_keys_ = arena_.allocate(DType::F32, {chunk_, kv_width});
  new_values_ = arena_.allocate(DType::F32, {chunk_, kv_width});
  positions_.reserve(static_cast<size_t>(chunk_));
  tokens_.reserve(static_cast<size_t>(context_));
}

void Transformer::check_append(size_t n) const {
  if (n == 0) fail("forward needs at least one token");
  if (static_cast<int64_t>(n) > context_ - position())
    fail("sequence of {} tokens exceeds the context length {} ({} already in the cache)",
         position() + static_cast<int64_t>(n), context_, position());
}

Tensor Transformer::forward_last(std::span<const int32_t> ids) {
  check_append(ids.size());
  const auto n = static_cast<int64_t>(ids.size());
  for (int64_t begin = 0; begin < n; begin += chunk_) {
    const int64_t count = std::min(chunk_, n - begin);
    run_chunk(ids.subspan(static_cast<size_t>(begin), static_cast<size_t>(count)),
              begin + count == n ? 1 : 0);
  }
  const Tensor logits = logits_.slice_rows(0, 1);
  backend_.matmul(normed_.slice_rows(0, 1), model_.weights.lm_head, nullptr, logits);
  return logits;
}

void Transformer::forward_all(std::span<const int32_t> ids, std::span<float> logits) {
  check_append(ids.size());
  const auto n = static_cast<int64_t>(ids.size());
  const int64_t vocab = config_.vocab_size;
  if (static_cast<int64_t>(logits.size()) != n * vocab)
    fail("forward_all: logits buffer holds {} floats, {} needed", logits.size(), n * vocab);
  for (int64_t begin = 0; begin < n; begin += chunk_) {
    const int64_t count = std::min(chunk_, n - begin);
    run_chunk(ids.subspan(static_cast<size_t>(begin), static_cast<size_t>(count)), count);
    const Tensor out(logits.data() + begin * vocab, DType::F32, {count, vocab});
    backend_.matmul(normed_.slice_rows(0, count), model_.weights.lm_head, nullptr, out);
  }
}

void Transformer::run_chunk(std::span<const int32_t> ids, int64_t out_rows) {
  const auto n = static_cast<int64_t>(ids.size());
  const ModelWeights& w = model_.weights;
  positions_.clear();
  for (int64_t t = 0; t < n; ++t) positions_.push_back(static_cast<int32_t>(position() + t));

  const Tensor x = residual_.slice_rows(0, n);
  backend_.embedding(w.token_embedding, ids, x);
  if (config_.positions == PositionKind::Learned) {
    const Tensor pos = projected_.slice_rows(0, n);
    backend_.embedding(w.position_embedding, positions_, pos);
    backend_.add(x, pos, x);
  }
  for (int64_t layer = 0; layer < config_.num_hidden_layers; ++layer) {
    attention_block(layer, n);
    mlp_block(layer, n);
  }
  tokens_.insert(tokens_.end(), ids.begin(), ids.end());
  if (out_rows > 0) {
    apply_norm(backend_, config_, x.slice_rows(n - out_rows, out_rows), w.final_norm_weight,
               w.final_norm_bias, normed_.slice_rows(0, out_rows));
  }
}

void Transformer::attention_block(int64_t layer, int64_t n) {
  const ModelConfig& c = config_;
  const LayerWeights& w = model_.weights.layers[static_cast<size_t>(layer)];
  const Tensor x = residual_.slice_rows(0, n);
  const Tensor h = normed_.slice_rows(0, n);
  apply_norm(backend_, config_, x, w.attn_norm_weight, w.attn_norm_bias, h);

  const Tensor q = query_.slice_rows(0, n).reshaped({n, c.num_attention_heads, c.head_dim});
  // An f32 cache takes the projections in place; an f16 one stores them after RoPE.
  const bool in_place = cache_.dtype() == DType::F32;
  const Tensor cache_k = cache_.keys(layer).slice_rows(position(), n);
  const Tensor cache_v = cache_.values(layer).slice_rows(position(), n);
  const Tensor k =
      in_place ? cache_k : new_keys_.slice_rows(0, n).reshaped({n, c.num_key_value_heads, c.head_dim});
  const Tensor v =
      in_place ? cache_v : new_values_.slice_rows(0, n).reshaped({n, c.num_key_value_heads, c.head_dim});
  const int64_t kv_width = c.num_key_value_heads * c.head_dim;
  backend_.matmul(h, w.q, optional_tensor(w.q_bias), q.reshaped({n, c.num_attention_heads * c.head_dim}));
  backend_.matmul(h, w.k, optional_tensor(w.k_bias), k.reshaped({n, kv_width}));
  backend_.matmul(h, w.v, optional_tensor(w.v_bias), v.reshaped({n, kv_width}));
  if (c.positions == PositionKind::Rotary) {
    backend_.rope(q, positions_, inv_freq_tensor_, c.rope_layout);
    backend_.rope(k, positions_, inv_freq_tensor_, c.rope_layout);
  }
  if (!in_place) {
    backend_.convert(k, cache_k);
    backend_.convert(v, cache_v);
  }
  const Tensor a = attended_.slice_rows(0, n).reshaped({n, c.num_attention_heads, c.head_dim});
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  backend_.attention(q, cache_.keys(layer), cache_.values(layer), position(), scale, a);

  const Tensor out = projected_.slice_rows(0, n);
  backend_.matmul(attended_.slice_rows(0, n), w.o, optional_tensor(w.o_bias), out);
  backend_.add(x, out, x);
}

void Transformer::mlp_block(int64_t layer, int64_t n) {
  const LayerWeights& w = model_.weights.layers[static_cast<size_t>(layer)];
  const Tensor x = residual_.slice_rows(0, n);
  const Tensor h = normed_.slice_rows(0, n);
  apply_norm(backend_, config_, x, w.mlp_norm_weight, w.mlp_norm_bias, h);

  const Tensor a = mlp_a_.slice_rows(0, n);
  if (config_.mlp == MlpKind::SwiGlu) {
    const Tensor b = mlp_b_.slice_rows(0, n);
    backend_.matmul(h, w.gate, optional_tensor(w.gate_bias), a);
    backend_.matmul(h, w.up, optional_tensor(w.up_bias), b);
    backend_.swiglu(a, b, a);
  } else {
    backend_.matmul(h, w.up, optional_tensor(w.up_bias), a);
    backend_.gelu(a, config_.mlp == MlpKind::GeluTanh ? GeluForm::Tanh : GeluForm::Erf, a);
  }
  const Tensor out = projected_.slice_rows(0, n);
  backend_.matmul(a, w.down, optional_tensor(w.down_bias), out);
  backend_.add(x, out, x);
}

}  // namespace tokenmill
