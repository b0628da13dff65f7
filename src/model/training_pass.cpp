#include "model/training_pass.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/layer_ops.h"
#include "model/norm.h"
#include "model/rope.h"
#include "model/weight_placement.h"

namespace tokenmill {

// Sizes the arena (first pass, no arena) or carves the buffers from it (second pass), from
// the one list in TrainingPass::plan, so the two can never disagree.
class TrainingPass::Plan {
 public:
  explicit Plan(Arena* arena) : arena_(arena) {}
  Tensor take(std::initializer_list<int64_t> dims) {
    int64_t n = 1;
    for (const int64_t d : dims) n *= d;
    bytes_ += Arena::footprint(static_cast<size_t>(n) * sizeof(float));
    return arena_ != nullptr ? arena_->allocate(DType::F32, dims) : Tensor{};
  }
  size_t bytes() const { return bytes_; }

 private:
  Arena* arena_;
  size_t bytes_ = 0;
};

TrainingPass::TrainingPass(const ModelConfig& config, Backend& backend, int64_t batch, int64_t seq_len,
                           const LoraConfig& lora, Activations activations)
    : config_(config),
      backend_(backend),
      lora_(lora),
      recompute_(activations == Activations::Recomputed),
      batch_(batch),
      seq_len_(seq_len),
      rows_(batch * seq_len) {
  if (batch < 1 || seq_len < 1)
    fail("training: batch ({}) and sequence length ({}) must be >= 1", batch, seq_len);
  if (seq_len > config.context_length())
    fail("training: sequence length {} exceeds the model's context length {}", seq_len,
         config.context_length());
  const auto row_bytes = static_cast<int64_t>(config.vocab_size * sizeof(float));
  logit_rows_ =
      std::clamp<int64_t>(static_cast<int64_t>(kLogitChunkBytes) / std::max<int64_t>(1, row_bytes), 1, rows_);
  positions_.resize(static_cast<size_t>(rows_));
  for (int64_t r = 0; r < rows_; ++r) positions_[static_cast<size_t>(r)] = static_cast<int32_t>(r % seq_len);
  if (config.attention_sinks || config.swiglu_limit > 0 || (config.mixture_of_experts() && config.mlp_bias))
    fail(
        "training: {} has attention sinks, a clamped SwiGLU or experts with biases (gpt-oss), whose backward "
        "the training pass does not run; the model runs for inference only",
        config.architecture);
  if (lora_.enabled()) check_lora_config(config, lora_);
  frozen_.layers.resize(static_cast<size_t>(config.num_hidden_layers));
  Plan sizing(nullptr);
  plan(sizing);
  arena_.emplace(sizing.bytes(), backend.memory());
  Plan carving(&*arena_);
  plan(carving);
  if (config.mixture_of_experts()) {
    if (normed_block_outputs(config))
      fail("training: {} has norms after its mixture of experts, which the training pass does not run",
           config.architecture);
    experts_.resize(recompute_ ? 1 : static_cast<size_t>(config.num_hidden_layers));
    if (config.router_aux_loss_coef > 0) load_balance_.emplace(config.num_experts);
    identity_slots_.resize(static_cast<size_t>(rows_ * config.experts_per_token));
    for (size_t i = 0; i < identity_slots_.size(); ++i) identity_slots_[i] = static_cast<int32_t>(i);
  }
  if (lora_.enabled()) {
    std::vector<float> s(static_cast<size_t>(lora_.rank * lora_.rank), 0.0f);
    for (size_t i = 0; i < s.size(); i += static_cast<size_t>(lora_.rank + 1)) s[i] = lora_.scale();
    backend.memory().copy_from_host(lora_scale_.data, s.data(), lora_scale_.nbytes());
  }
}

void TrainingPass::plan(Plan& p) {
  const ModelConfig& c = config_;
  const int64_t n = rows_, hidden = c.hidden_size, ff = c.mlp_width();
  const int64_t q_width = c.num_attention_heads * c.head_dim, kv_width = c.num_key_value_heads * c.head_dim;
  const bool gated = gated_mlp(c.mlp), moe = c.mixture_of_experts();
  const int64_t slots = moe ? n * c.experts_per_token : n;  // the MLP's rows
  inv_freq_tensor_ = p.take({std::max<int64_t>(1, c.rotary_dim / 2)});
  if (c.sliding_rope_theta > 0) sliding_inv_freq_ = p.take({std::max<int64_t>(1, c.rotary_dim / 2)});
  residual_.clear();
  for (int64_t l = 0; l <= c.num_hidden_layers; ++l) residual_.push_back(p.take({n, hidden}));
  layers_.assign(recompute_ ? 1 : static_cast<size_t>(c.num_hidden_layers), {});
  for (LayerActivations& a : layers_) {
    if (!c.post_norms) a.h1 = p.take({n, hidden});
    a.q = p.take({n, q_width});
    a.k = p.take({n, kv_width});
    if (c.qk_norm != QkNorm::None) {
      a.q_raw = p.take({n, q_width});
      a.k_raw = p.take({n, kv_width});
    }
    a.v = p.take({n, kv_width});
    a.attended = p.take({n, q_width});
    a.mid = p.take({n, hidden});
    if (normed_block_outputs(c)) {
      a.o_raw = p.take({n, hidden});
      a.down_raw = p.take({n, hidden});
    }
    if (!c.post_norms) a.h2 = p.take({n, hidden});
    a.a = p.take({slots, ff});
    if (gated) a.b = p.take({slots, ff});
    a.act = p.take({slots, ff});
    if (moe) {
      a.scores = p.take({n, c.num_experts});
      a.inputs = p.take({slots, hidden});
      a.outputs = p.take({slots, hidden});
    }
    for (const LoraTarget t : lora_.targets) a.lora_u[static_cast<size_t>(t)] = p.take({n, lora_.rank});
  }
  final_ = p.take({n, hidden});
  logits_ = p.take({logit_rows_, c.vocab_size});
  if (c.final_logit_softcapping > 0) dlogits_ = p.take({logit_rows_, c.vocab_size});
  losses_ = p.take({n});
  dx_ = p.take({n, hidden});
  dh_ = p.take({n, hidden});
  dtmp_ = p.take({n, hidden});
  dq_ = p.take({n, q_width});
  dk_ = p.take({n, kv_width});
  dv_ = p.take({n, kv_width});
  dattended_ = p.take({n, q_width});
  da_ = p.take({slots, ff});
  if (gated) db_ = p.take({slots, ff});
  dact_ = p.take({slots, ff});
  if (moe) {
    dslots_ = p.take({slots, hidden});
    dslots_b_ = p.take({slots, hidden});
    dscores_ = p.take({n, c.num_experts});
  }
  norm_sinks_ = p.take({2, hidden});
  if (c.qk_norm != QkNorm::None) {
    dq_raw_ = p.take({n, q_width});
    dk_raw_ = p.take({n, kv_width});
    qk_norm_sink_ = p.take({std::max(c.q_norm_width(), c.k_norm_width())});
  }
  if (lora_.enabled()) {
    lora_scale_ = p.take({lora_.rank, lora_.rank});
    lora_t_ = p.take({n, lora_.rank});
    lora_du_ = p.take({n, lora_.rank});
    lora_wide_ = p.take({n, std::max({hidden, ff, q_width, kv_width})});
  }
}

int64_t TrainingPass::check(const ModelWeights& weights, std::span<const int32_t> inputs,
                            std::span<const int32_t> targets) const {
  if (!weights_in(weights, backend_.memory()))
    fail("training: the model's weights are not in the memory of the {} backend (place_weights first)",
         backend_.name());
  if (static_cast<int64_t>(inputs.size()) != rows_ || static_cast<int64_t>(targets.size()) != rows_)
    fail("training: inputs and targets must hold {} x {} tokens, got {} and {}", batch_, seq_len_,
         inputs.size(), targets.size());
  int64_t scored = 0;
  for (const int32_t t : targets) {
    if (t >= config_.vocab_size)
      fail("training: target id {} is outside the vocabulary ({})", t, config_.vocab_size);
    scored += t >= 0 ? 1 : 0;
  }
  if (scored == 0) fail("training: no target in the batch is scored (all are < 0)");
  return scored;
}

Tensor TrainingPass::sequence(const Tensor& rows, int64_t b, int64_t heads) const {
  return rows.slice_rows(b * seq_len_, seq_len_).reshaped({seq_len_, heads, config_.head_dim});
}

LayerTensors TrainingPass::layer_tensors(int64_t layer) {
  const ModelConfig& c = config_;
  const LayerActivations& a = acts(layer);
  const int64_t n = rows_;
  LayerTensors t;
  t.x = residual_[static_cast<size_t>(layer)];
  t.h1 = a.h1;
  t.q_raw = a.q_raw;
  t.k_raw = a.k_raw;
  t.q = a.q.reshaped({n, c.num_attention_heads, c.head_dim});
  t.k = a.k.reshaped({n, c.num_key_value_heads, c.head_dim});
  t.v = a.v.reshaped({n, c.num_key_value_heads, c.head_dim});
  t.attended = a.attended.reshaped({n, c.num_attention_heads, c.head_dim});
  t.o_raw = a.o_raw;
  t.o = t.delta = dtmp_;  // the attention's delta is spent (in mid) before the MLP's is formed
  t.mid = a.mid;
  t.h2 = a.h2;
  t.a = a.a;
  t.b = a.b;
  t.act = a.act;
  t.down_raw = a.down_raw;
  return t;
}

void TrainingPass::forward(const ModelWeights& w, std::span<const int32_t> inputs) {
  const ModelConfig& c = config_;
  if (c.positions == PositionKind::Rotary) {
    // The sequences' positions reach seq_len: LongRoPE picks its factors by it (model/rope.h).
    const RopeFrequencies f = model_rope_frequencies(c, w, seq_len_);
    backend_.memory().copy_from_host(inv_freq_tensor_.data, f.global.data(), f.global.size() * sizeof(float));
    if (!f.sliding.empty())
      backend_.memory().copy_from_host(sliding_inv_freq_.data, f.sliding.data(),
                                       f.sliding.size() * sizeof(float));
  }
  embed_tokens(backend_, c, w, inputs, positions_, residual_[0], dtmp_);
  if (load_balance_) load_balance_->clear();
  counting_routes_ = true;  // the forward's routes count once (not again when recomputed)
  const int64_t last = c.num_hidden_layers - 1;
  for (int64_t l = 0; l <= last; ++l) {
    const LayerTensors t = layer_tensors(l);
    forward_layer(backend_, c, w.layers[static_cast<size_t>(l)], l, t, nullptr,
                  {positions_, &rope_frequencies(l)}, *this);
    // The next layer's input; the last layer's is added by the fused final norm below.
    if (l < last) backend_.add(t.mid, t.delta, residual_[static_cast<size_t>(l + 1)]);
  }
  counting_routes_ = false;
  apply_add_norm(backend_, config_, acts(last).mid, dtmp_, residual_.back(), w.final_norm_weight,
                 w.final_norm_bias, final_);
}

void TrainingPass::project(int64_t layer, const Tensor& x, std::span<const Projection> projections) {
  for (const Projection& p : projections) linear(x, *p.w, p.bias, *p.y, layer, p.target);
}

void TrainingPass::attend(int64_t, const AttentionScores& scores, const LayerTensors& t) {
  const ModelConfig& c = config_;
  for (int64_t b = 0; b < batch_; ++b)
    backend_.attention(sequence(t.q, b, c.num_attention_heads), sequence(t.k, b, c.num_key_value_heads),
                       sequence(t.v, b, c.num_key_value_heads), 0, scores,
                       sequence(t.attended, b, c.num_attention_heads));
}

void TrainingPass::experts(int64_t layer, const LayerWeights& w, const Tensor& h, const Tensor& delta) {
  const LayerActivations& a = acts(layer);
  ExpertScratch& s = expert_scratch(layer);
  const std::span<const float> scores = experts_forward(backend_, config_, w, h,
                                                        {.scores = a.scores,
                                                         .inputs = a.inputs,
                                                         .gate = a.a,
                                                         .up = a.b,
                                                         .act = a.act,
                                                         .outputs = a.outputs,
                                                         .delta = delta},
                                                        s);
  if (!load_balance_ || !counting_routes_) return;
  host_p_.resize(scores.size());
  router_probabilities(scores, config_.num_experts, host_p_);
  load_balance_->add(s.routing, host_p_);
}

std::span<const float> TrainingPass::host_floats(const Tensor& t, std::vector<float>& storage) const {
  const auto count = static_cast<size_t>(t.numel());
  if (backend_.memory().is_host()) return {t.as<const float>(), count};
  storage.resize(count);
  backend_.memory().copy_to_host(storage.data(), t.data, t.nbytes());
  return storage;
}

// With delta = sum_j w_j out_{s_j} per token (s_j its j-th choice's slot):
//   d w_j = out_{s_j} . d delta,  d out_s = w_s d delta[token(s)],
// then each expert's down, SwiGLU, gate and up backward over its slots, d(inputs) scattered
// back to their tokens, and the router's scores' gradient (router_gradient.h) through W_router.
void TrainingPass::experts_backward(const LayerWeights& lw, const LayerWeights& lg, int64_t layer) {
  const ModelConfig& c = config_;
  const LayerActivations& a = acts(layer);
  const ExpertRouting& r = expert_scratch(layer).routing;
  const int64_t experts = c.num_experts, k = c.experts_per_token, hidden = c.hidden_size;
  // d(weights), on the host.
  const std::span<const float> outputs = host_floats(a.outputs, host_a_), ddelta = host_floats(dx_, host_b_);
  dweights_.resize(r.slots.size());
  slot_weights_.resize(r.slots.size());
  for (size_t choice = 0; choice < r.slots.size(); ++choice) {
    const float* out = outputs.data() + static_cast<int64_t>(r.slots[choice]) * hidden;
    const float* d = ddelta.data() + static_cast<int64_t>(choice / static_cast<size_t>(k)) * hidden;
    double dot = 0.0;
    for (int64_t i = 0; i < hidden; ++i) dot += static_cast<double>(out[i]) * d[i];
    dweights_[choice] = static_cast<float>(dot);
    slot_weights_[static_cast<size_t>(r.slots[choice])] = r.weights[choice];
  }
  // d(outputs) = each slot's weight x d(delta) of its token.
  backend_.embedding(dx_, r.slot_tokens, dslots_);
  backend_.combine_rows(dslots_, identity_slots_, slot_weights_, dslots_b_);
  const auto matrix = [&](const Tensor& stacked, int64_t e) {
    return stacked.data != nullptr ? expert_matrix(stacked, e, experts) : Tensor{};
  };
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t first = r.expert_begin[static_cast<size_t>(e)];
    const int64_t count = r.expert_begin[static_cast<size_t>(e) + 1] - first;
    if (count == 0) continue;
    const Tensor dact = dact_.slice_rows(first, count), dw = matrix(lg.expert_down, e);
    backend_.matmul_backward(a.act.slice_rows(first, count), expert_matrix(lw.expert_down, e, experts),
                             dslots_b_.slice_rows(first, count), &dact, optional_tensor(dw), nullptr);
  }
  backend_.swiglu_backward(a.a, a.b, dact_, da_, db_);
  for (int64_t e = 0; e < experts; ++e) {  // d(inputs): dslots_ (gate's) + dslots_b_ (up's)
    const int64_t first = r.expert_begin[static_cast<size_t>(e)];
    const int64_t count = r.expert_begin[static_cast<size_t>(e) + 1] - first;
    if (count == 0) continue;
    const Tensor x = a.inputs.slice_rows(first, count);
    const Tensor dx_gate = dslots_.slice_rows(first, count), dx_up = dslots_b_.slice_rows(first, count);
    const Tensor dw_gate = matrix(lg.expert_gate, e), dw_up = matrix(lg.expert_up, e);
    backend_.matmul_backward(x, expert_matrix(lw.expert_gate, e, experts), da_.slice_rows(first, count),
                             &dx_gate, optional_tensor(dw_gate), nullptr);
    backend_.matmul_backward(x, expert_matrix(lw.expert_up, e, experts), db_.slice_rows(first, count), &dx_up,
                             optional_tensor(dw_up), nullptr);
  }
  backend_.add(dslots_, dslots_b_, dslots_);
  // The router: d(scores) on the host, then through W_router into dh_ (overwritten), and the
  // gathered inputs' gradients added to their tokens' rows.
  const std::span<const float> scores = host_floats(a.scores, host_a_);
  host_p_.resize(scores.size());
  host_dscores_.resize(scores.size());
  router_probabilities(scores, experts, host_p_);
  router_scores_backward(host_p_, r, dweights_, c.normalize_expert_weights, host_dscores_);
  if (load_balance_)
    load_balance_->add_gradient(host_p_, grad_scale_ * static_cast<float>(c.router_aux_loss_coef),
                                host_dscores_);
  backend_.memory().copy_from_host(dscores_.data, host_dscores_.data(), dscores_.nbytes());
  backend_.matmul_backward(mlp_input(layer), lw.router, dscores_, &dh_, optional_tensor(lg.router), nullptr);
  backend_.embedding_backward(r.slot_tokens, dslots_, dh_);
}

double TrainingPass::score(const ModelWeights& w, const ModelWeights* grads, std::span<const int32_t> targets,
                           int64_t count, float grad_scale) {
  const float row_scale = grad_scale / static_cast<float>(count);
  double total = 0.0;
  for (int64_t r0 = 0; r0 < rows_; r0 += logit_rows_) {
    const int64_t r = std::min(logit_rows_, rows_ - r0);
    const Tensor logits = logits_.slice_rows(0, r);
    const Tensor hidden = final_.slice_rows(r0, r);
    const Tensor losses = losses_.slice_rows(r0, r).reshaped({r});
    output_logits(backend_, config_, w, hidden, logits);
    // The logits' gradient overwrites them, unless the soft cap's backward needs them after.
    const auto cap = static_cast<float>(config_.final_logit_softcapping);
    const Tensor dlogits = cap > 0 ? dlogits_.slice_rows(0, r) : logits;
    backend_.cross_entropy(logits, targets.subspan(static_cast<size_t>(r0), static_cast<size_t>(r)),
                           row_scale, losses, grads != nullptr ? &dlogits : nullptr);
    const std::span<const float> host_losses = host_floats(losses, host_losses_);
    for (int64_t i = 0; i < r; ++i) total += host_losses[static_cast<size_t>(i)];
    if (grads != nullptr) {
      if (cap > 0) backend_.softcap_backward(logits, cap, dlogits, dlogits);
      const Tensor dhidden = dh_.slice_rows(r0, r);
      backend_.matmul_backward(hidden, w.lm_head, dlogits, &dhidden, optional_tensor(grads->lm_head),
                               nullptr);
    }
  }
  return total / static_cast<double>(count);
}

void TrainingPass::backward_layer(const ModelWeights& w, const ModelWeights& g, int64_t layer) {
  const ModelConfig& c = config_;
  const LayerWeights& lw = w.layers[static_cast<size_t>(layer)];
  const LayerWeights& lg = g.layers[static_cast<size_t>(layer)];
  const int64_t n = rows_, q_width = c.num_attention_heads * c.head_dim;
  if (recompute_) {  // dtmp_ and the LoRA scratch are free here; dx_ is left alone
    const LayerTensors t = layer_tensors(layer);
    forward_attention(backend_, c, lw, layer, t, nullptr, {positions_, &rope_frequencies(layer)}, *this);
    forward_mlp_activation(backend_, c, lw, layer, t, *this);
    if (c.mixture_of_experts()) {          // the experts' forward kept all they need
    } else if (normed_block_outputs(c)) {  // its norm's backward needs the down projection's output
      linear(t.act, lw.down, optional_tensor(lw.down_bias), t.down_raw, layer, LoraTarget::Down);
    } else {
      lora_u(acts(layer).act, layer, LoraTarget::Down);
    }
  }
  const LayerActivations& a = acts(layer);
  // dx_ holds d(next residual). MLP: next = mid + down(act), or with post-norms mid +
  // norm_2(down(act)).
  const Tensor& h2 = mlp_input(layer);
  if (c.mixture_of_experts()) {
    experts_backward(lw, lg, layer);
  } else if (gated_mlp(c.mlp)) {
    linear_backward(a.act, lw.down, block_output_grad(a.down_raw, lw, lg, true), dact_, lg.down, lg.down_bias,
                    layer, LoraTarget::Down);
    if (c.mlp == MlpKind::GeGlu) {
      backend_.geglu_backward(a.a, a.b, dact_, da_, db_);
    } else {
      backend_.swiglu_backward(a.a, a.b, dact_, da_, db_);
    }
    linear_backward(h2, lw.gate, da_, dh_, lg.gate, lg.gate_bias, layer, LoraTarget::Gate);
    linear_backward(h2, lw.up, db_, dtmp_, lg.up, lg.up_bias, layer, LoraTarget::Up);
    backend_.add(dh_, dtmp_, dh_);
  } else {
    linear_backward(a.act, lw.down, block_output_grad(a.down_raw, lw, lg, true), dact_, lg.down, lg.down_bias,
                    layer, LoraTarget::Down);
    backend_.gelu_backward(a.a, c.mlp == MlpKind::GeluTanh ? GeluForm::Tanh : GeluForm::Erf, dact_, da_);
    linear_backward(h2, lw.up, da_, dh_, lg.up, lg.up_bias, layer, LoraTarget::Up);
  }
  add_block_input_grad(a.mid, lw.mlp_norm_weight, lg.mlp_norm_weight, lg.mlp_norm_bias);  // d(mid)
  // Attention: mid = x + o(attended), or with post-norms x + norm_1(o(attended)).
  linear_backward(a.attended, lw.o, block_output_grad(a.o_raw, lw, lg, false), dattended_, lg.o, lg.o_bias,
                  layer, LoraTarget::O);
  const int64_t h = c.num_attention_heads, kvh = c.num_key_value_heads;
  for (int64_t b = 0; b < batch_; ++b)
    backend_.attention_backward(sequence(a.q, b, h), sequence(a.k, b, kvh), sequence(a.v, b, kvh),
                                sequence(a.attended, b, h), sequence(dattended_, b, h),
                                c.attention_scores(layer), sequence(dq_, b, h), sequence(dk_, b, kvh),
                                sequence(dv_, b, kvh));
  if (c.positions == PositionKind::Rotary) {
    const float magnitude = c.rope_magnitude(layer);
    backend_.rope_backward(dq_.reshaped({n, c.num_attention_heads, c.head_dim}), positions_,
                           rope_frequencies(layer), c.rope_layout, magnitude);
    backend_.rope_backward(dk_.reshaped({n, c.num_key_value_heads, c.head_dim}), positions_,
                           rope_frequencies(layer), c.rope_layout, magnitude);
  }
  const bool qk_norm = c.qk_norm != QkNorm::None;
  if (qk_norm) {  // d(q, k before their norms), the norms' weight gradients accumulated
    const auto eps = static_cast<float>(c.norm_eps);
    const int64_t qw = c.q_norm_width(), kw = c.k_norm_width();
    backend_.rms_norm_backward(norm_rows(a.q_raw, qw), lw.q_norm_weight, eps, norm_rows(dq_, qw),
                               norm_rows(dq_raw_, qw), qk_norm_grad(lg.q_norm_weight, qw),
                               GradWrite::Overwrite);
    backend_.rms_norm_backward(norm_rows(a.k_raw, kw), lw.k_norm_weight, eps, norm_rows(dk_, kw),
                               norm_rows(dk_raw_, kw), qk_norm_grad(lg.k_norm_weight, kw),
                               GradWrite::Overwrite);
  }
  const Tensor& dq = qk_norm ? dq_raw_ : dq_;
  const Tensor& dk = qk_norm ? dk_raw_ : dk_;
  const Tensor& h1 = attention_input(layer);
  linear_backward(h1, lw.q, dq.reshaped({n, q_width}), dh_, lg.q, lg.q_bias, layer, LoraTarget::Q);
  linear_backward(h1, lw.k, dk, dtmp_, lg.k, lg.k_bias, layer, LoraTarget::K);
  backend_.add(dh_, dtmp_, dh_);
  linear_backward(h1, lw.v, dv_, dtmp_, lg.v, lg.v_bias, layer, LoraTarget::V);
  backend_.add(dh_, dtmp_, dh_);
  add_block_input_grad(residual_[static_cast<size_t>(layer)], lw.attn_norm_weight, lg.attn_norm_weight,
                       lg.attn_norm_bias);  // d(x)
}

const Tensor& TrainingPass::block_output_grad(const Tensor& raw, const LayerWeights& w, const LayerWeights& g,
                                              bool mlp) {
  if (!normed_block_outputs(config_)) return dx_;
  const bool sandwich = config_.sandwich_norms;  // else post-norms
  const Tensor& weight = sandwich ? (mlp ? w.mlp_post_norm_weight : w.attn_post_norm_weight)
                                  : (mlp ? w.mlp_norm_weight : w.attn_norm_weight);
  const Tensor& dweight = sandwich ? (mlp ? g.mlp_post_norm_weight : g.attn_post_norm_weight)
                                   : (mlp ? g.mlp_norm_weight : g.attn_norm_weight);
  const Tensor& dbias = sandwich ? Tensor{} : mlp ? g.mlp_norm_bias : g.attn_norm_bias;
  apply_norm_backward(backend_, config_, raw, weight, dx_, dtmp_, norm_grad(dweight, 0), norm_grad(dbias, 1),
                      GradWrite::Overwrite);
  return dtmp_;
}

void TrainingPass::add_block_input_grad(const Tensor& x, const Tensor& weight, const Tensor& dweight,
                                        const Tensor& dbias) {
  if (config_.post_norms) {
    backend_.add(dx_, dh_, dx_);
  } else {
    apply_norm_backward(backend_, config_, x, weight, dh_, dx_, norm_grad(dweight, 0), norm_grad(dbias, 1),
                        GradWrite::Accumulate);
  }
}

void TrainingPass::linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y,
                          int64_t layer, LoraTarget target) {
  backend_.matmul(x, w, bias, y);
  if (!lora_u(x, layer, target)) return;
  const Tensor& u = acts(layer).lora_u[static_cast<size_t>(target)];
  const Tensor delta(lora_wide_.data, DType::F32, {rows_, y.cols()});
  backend_.matmul(u, adapter_->at(layer, target).b, nullptr, delta);  // u B^T
  backend_.add(y, delta, y);
}

bool TrainingPass::lora_u(const Tensor& x, int64_t layer, LoraTarget target) {
  if (adapter_ == nullptr || !lora_.targets_layer(target)) return false;
  const Tensor& u = acts(layer).lora_u[static_cast<size_t>(target)];
  backend_.matmul(x, adapter_->at(layer, target).a, nullptr, lora_t_);  // t = x A^T
  backend_.matmul(lora_t_, lora_scale_, nullptr, u);                    // u = s t
  return true;
}

void TrainingPass::linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& dx,
                                   const Tensor& dw, const Tensor& db, int64_t layer, LoraTarget target) {
  backend_.matmul_backward(x, w, dy, &dx, optional_tensor(dw), optional_tensor(db));
  if (adapter_ == nullptr || !lora_.targets_layer(target)) return;
  const LoraLinear& ad = adapter_->at(layer, target);
  const LoraLinear& g = adapter_grads_->at(layer, target);
  const Tensor& u = acts(layer).lora_u[static_cast<size_t>(target)];
  backend_.matmul_backward(u, ad.b, dy, &lora_du_, &g.b, nullptr);  // du = dy B, dB += dy^T u
  backend_.matmul(lora_du_, lora_scale_, nullptr, lora_t_);         // dt = s du
  const Tensor dx_adapter(lora_wide_.data, DType::F32, {rows_, x.cols()});
  backend_.matmul_backward(x, ad.a, lora_t_, &dx_adapter, &g.a, nullptr);  // dt A, dA += dt^T x
  backend_.add(dx, dx_adapter, dx);
}

void TrainingPass::use_adapter(const LoraWeights* adapter, const LoraWeights* adapter_grads) {
  adapter_ = adapter;
  adapter_grads_ = adapter_grads;
  if (adapter == nullptr) return;
  if (!lora_.enabled()) fail("training: an adapter was given to a pass built without LoRA");
  for (const LoraWeights* w : {adapter, adapter_grads}) {
    if (w == nullptr) continue;
    if (static_cast<int64_t>(w->layers.size()) != config_.num_hidden_layers)
      fail("training: the adapter has {} layers, the model {}", w->layers.size(), config_.num_hidden_layers);
    for (int64_t l = 0; l < config_.num_hidden_layers; ++l)
      for (const LoraTarget t : lora_.targets) {
        const auto [out, in] = lora_target_shape(config_, t);
        const LoraLinear& ad = w->at(l, t);
        if (ad.a.data == nullptr || ad.b.data == nullptr || ad.a.numel() != lora_.rank * in ||
            ad.b.numel() != out * lora_.rank)
          fail("training: the adapter of layer {} target {} is missing or not [{}, {}] x [{}, {}]", l,
               lora_target_name(t), lora_.rank, in, out, lora_.rank);
      }
  }
}

TrainingPass::Result TrainingPass::scored(double cross_entropy, int64_t tokens) const {
  const double router = load_balance_ ? config_.router_aux_loss_coef * load_balance_->loss() : 0.0;
  return {cross_entropy + router, tokens, router};
}

TrainingPass::Result TrainingPass::run_backward(const ModelWeights& weights, const ModelWeights* grads,
                                                std::span<const int32_t> inputs,
                                                std::span<const int32_t> targets, float grad_scale) {
  const int64_t count = check(weights, inputs, targets);
  const ModelWeights& g = grads != nullptr ? *grads : frozen_;
  grad_scale_ = grad_scale;
  forward(weights, inputs);
  Result result = scored(score(weights, &g, targets, count, grad_scale), count);
  // dh_ holds d(final normed); back through the final norm into the residual stream.
  apply_norm_backward(backend_, config_, residual_.back(), weights.final_norm_weight, dh_, dx_,
                      norm_grad(g.final_norm_weight, 0), norm_grad(g.final_norm_bias, 1),
                      GradWrite::Overwrite);
  for (int64_t l = config_.num_hidden_layers - 1; l >= 0; --l) backward_layer(weights, g, l);
  if (grads == nullptr) return result;
  if (config_.positions == PositionKind::Learned)
    backend_.embedding_backward(positions_, dx_, grads->position_embedding);
  if (config_.scale_embeddings)  // x = sqrt(hidden) embedding (embed_tokens)
    backend_.scale(dx_, static_cast<float>(std::sqrt(static_cast<double>(config_.hidden_size))), dx_);
  backend_.embedding_backward(inputs, dx_, grads->token_embedding);
  return result;
}

TrainingPass::Result TrainingPass::forward_backward(const ModelWeights& weights, const ModelWeights& grads,
                                                    std::span<const int32_t> inputs,
                                                    std::span<const int32_t> targets, float grad_scale) {
  use_adapter(nullptr, nullptr);
  return run_backward(weights, &grads, inputs, targets, grad_scale);
}

TrainingPass::Result TrainingPass::forward_backward(const ModelWeights& weights, const LoraWeights& adapter,
                                                    const LoraWeights& adapter_grads,
                                                    std::span<const int32_t> inputs,
                                                    std::span<const int32_t> targets, float grad_scale) {
  use_adapter(&adapter, &adapter_grads);
  return run_backward(weights, nullptr, inputs, targets, grad_scale);
}

TrainingPass::Result TrainingPass::evaluate(const ModelWeights& weights, std::span<const int32_t> inputs,
                                            std::span<const int32_t> targets, const LoraWeights* adapter) {
  const int64_t count = check(weights, inputs, targets);
  use_adapter(adapter, nullptr);
  forward(weights, inputs);
  return scored(score(weights, nullptr, targets, count, 1.0f), count);
}

}  // namespace tokenmill
