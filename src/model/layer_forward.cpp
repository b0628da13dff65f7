#include "model/layer_forward.h"

#include "model/norm.h"

namespace tokenmill {

namespace {

// out = the norm after a block's output projection (post-norms: the block's own norm;
// sandwich norms: its post norm) of raw.
void output_norm(Backend& backend, const ModelConfig& c, const Tensor& raw, const Tensor& block_weight,
                 const Tensor& block_bias, const Tensor& post_weight, const Tensor& out) {
  if (c.post_norms) {
    apply_norm(backend, c, raw, block_weight, block_bias, out);
  } else {
    apply_norm(backend, c, raw, post_weight, Tensor{}, out);
  }
}

}  // namespace

namespace {

// matmul_many over `operands` ([x, w, bias, y] each, bias.data null for none), `products` its
// scratch.
void run_products(Backend& backend, const std::vector<std::array<Tensor, 4>>& operands,
                  std::vector<Backend::MatmulProduct>& products) {
  products.clear();
  for (const auto& [x, w, bias, y] : operands) products.push_back({&x, &w, optional_tensor(bias), &y});
  backend.matmul_many(products);
}

// Expert e's part of stacked expert biases, or an absent tensor without biases.
Tensor expert_bias(const Tensor& stacked, int64_t e, int64_t experts) {
  return stacked.data != nullptr ? expert_vector(stacked, e, experts) : Tensor{};
}

}  // namespace

std::span<const float> experts_forward(Backend& backend, const ModelConfig& c, const LayerWeights& w,
                                       const Tensor& h, const ExpertTensors& t, ExpertScratch& s) {
  const int64_t n = h.rows();
  backend.matmul(h, w.router, optional_tensor(w.router_bias), t.scores);
  std::span<const float> host_scores(t.scores.as<const float>(), static_cast<size_t>(t.scores.numel()));
  if (!backend.memory().is_host()) {
    s.host_scores.resize(host_scores.size());
    backend.memory().copy_to_host(s.host_scores.data(), t.scores.data, t.scores.nbytes());
    host_scores = s.host_scores;
  }
  ExpertRouting& r = s.routing;
  route_to_experts(host_scores, n, c.num_experts, c.experts_per_token, c.normalize_expert_weights, r);
  backend.embedding(h, r.slot_tokens, t.inputs);  // each expert's tokens together
  std::vector<std::array<Tensor, 4>>& gate_up = s.operands[0];
  std::vector<std::array<Tensor, 4>>& down = s.operands[1];
  gate_up.clear();
  down.clear();
  for (int64_t e = 0; e < c.num_experts; ++e) {
    const int64_t first = r.expert_begin[static_cast<size_t>(e)];
    const int64_t count = r.expert_begin[static_cast<size_t>(e) + 1] - first;
    if (count == 0) continue;
    const Tensor x = t.inputs.slice_rows(first, count);
    const int64_t experts = c.num_experts;
    gate_up.push_back({x, expert_matrix(w.expert_gate, e, experts),
                       expert_bias(w.expert_gate_bias, e, experts), t.gate.slice_rows(first, count)});
    gate_up.push_back({x, expert_matrix(w.expert_up, e, experts), expert_bias(w.expert_up_bias, e, experts),
                       t.up.slice_rows(first, count)});
    down.push_back({t.act.slice_rows(first, count), expert_matrix(w.expert_down, e, experts),
                    expert_bias(w.expert_down_bias, e, experts), t.outputs.slice_rows(first, count)});
  }
  run_products(backend, gate_up, s.products);
  if (c.swiglu_limit > 0) {  // every slot at once
    backend.clamped_swiglu(t.gate, t.up, static_cast<float>(c.swiglu_alpha),
                           static_cast<float>(c.swiglu_limit), t.act);
  } else {
    backend.swiglu(t.gate, t.up, t.act);
  }
  run_products(backend, down, s.products);
  backend.combine_rows(t.outputs, r.slots, r.weights, t.delta);
  return host_scores;
}

void forward_attention(Backend& backend, const ModelConfig& c, const LayerWeights& w, int64_t layer,
                       const LayerTensors& t, const Tensor* pending, const LayerPositions& positions,
                       LayerHooks& hooks) {
  const int64_t n = t.x.rows();
  if (c.post_norms) {
    if (pending != nullptr) backend.add(t.x, *pending, t.x);
  } else if (pending != nullptr) {
    apply_add_norm(backend, c, t.x, *pending, t.x, w.attn_norm_weight, w.attn_norm_bias, t.h1);
  } else {
    apply_norm(backend, c, t.x, w.attn_norm_weight, w.attn_norm_bias, t.h1);
  }
  const Tensor& input = c.post_norms ? t.x : t.h1;
  const bool qk_norm = c.qk_norm != QkNorm::None;
  const Tensor q_rows = (qk_norm ? t.q_raw : t.q).reshaped({n, c.num_attention_heads * c.head_dim});
  const Tensor k_rows = (qk_norm ? t.k_raw : t.k).reshaped({n, c.num_key_value_heads * c.head_dim});
  const Tensor v_rows = t.v.reshaped({n, c.num_key_value_heads * c.head_dim});
  const Projection qkv[] = {{&w.q, optional_tensor(w.q_bias), &q_rows, LoraTarget::Q},
                            {&w.k, optional_tensor(w.k_bias), &k_rows, LoraTarget::K},
                            {&w.v, optional_tensor(w.v_bias), &v_rows, LoraTarget::V}};
  hooks.project(layer, input, qkv);
  if (qk_norm) {  // over rows of q_norm_width() / k_norm_width(): one head, or the whole projection
    const auto eps = static_cast<float>(c.norm_eps);
    const auto parts = [](const Tensor& x, int64_t width) { return x.reshaped({x.numel() / width, width}); };
    backend.rms_norm(parts(t.q_raw, c.q_norm_width()), w.q_norm_weight, eps, parts(t.q, c.q_norm_width()));
    backend.rms_norm(parts(t.k_raw, c.k_norm_width()), w.k_norm_weight, eps, parts(t.k, c.k_norm_width()));
  }
  if (c.positions == PositionKind::Rotary) {
    const float magnitude = c.rope_magnitude(layer);
    backend.rope(t.q, positions.positions, *positions.inv_freq, c.rope_layout, magnitude);
    backend.rope(t.k, positions.positions, *positions.inv_freq, c.rope_layout, magnitude);
  }
  hooks.attend(layer, layer_attention_scores(c, w, layer), t);
  const Tensor attended = t.attended.reshaped({n, c.num_attention_heads * c.head_dim});
  const Tensor& o = normed_block_outputs(c) ? t.o_raw : t.o;
  const Projection output[] = {{&w.o, optional_tensor(w.o_bias), &o, LoraTarget::O}};
  hooks.project(layer, attended, output);
  if (normed_block_outputs(c))
    output_norm(backend, c, t.o_raw, w.attn_norm_weight, w.attn_norm_bias, w.attn_post_norm_weight, t.o);
}

void forward_mlp_activation(Backend& backend, const ModelConfig& c, const LayerWeights& w, int64_t layer,
                            const LayerTensors& t, LayerHooks& hooks) {
  if (c.post_norms) {
    backend.add(t.x, t.o, t.mid);
  } else {
    apply_add_norm(backend, c, t.x, t.o, t.mid, w.mlp_norm_weight, w.mlp_norm_bias, t.h2);
  }
  const Tensor& input = c.post_norms ? t.mid : t.h2;
  if (c.mixture_of_experts()) {
    hooks.experts(layer, w, input, t.delta);
    return;
  }
  if (gated_mlp(c.mlp)) {
    const Projection gate_up[] = {{&w.gate, optional_tensor(w.gate_bias), &t.a, LoraTarget::Gate},
                                  {&w.up, optional_tensor(w.up_bias), &t.b, LoraTarget::Up}};
    hooks.project(layer, input, gate_up);
    if (c.mlp == MlpKind::GeGlu) {
      backend.geglu(t.a, t.b, t.act);
    } else {
      backend.swiglu(t.a, t.b, t.act);
    }
  } else {
    const Projection up[] = {{&w.up, optional_tensor(w.up_bias), &t.a, LoraTarget::Up}};
    hooks.project(layer, input, up);
    backend.gelu(t.a, c.mlp == MlpKind::GeluTanh ? GeluForm::Tanh : GeluForm::Erf, t.act);
  }
}

void forward_mlp_output(Backend& backend, const ModelConfig& c, const LayerWeights& w, int64_t layer,
                        const LayerTensors& t, LayerHooks& hooks) {
  if (c.mixture_of_experts()) return;
  const Tensor& down = normed_block_outputs(c) ? t.down_raw : t.delta;
  const Projection output[] = {{&w.down, optional_tensor(w.down_bias), &down, LoraTarget::Down}};
  hooks.project(layer, t.act, output);
  if (normed_block_outputs(c))
    output_norm(backend, c, t.down_raw, w.mlp_norm_weight, w.mlp_norm_bias, w.mlp_post_norm_weight, t.delta);
}

void forward_layer(Backend& backend, const ModelConfig& c, const LayerWeights& w, int64_t layer,
                   const LayerTensors& t, const Tensor* pending, const LayerPositions& positions,
                   LayerHooks& hooks) {
  forward_attention(backend, c, w, layer, t, pending, positions, hooks);
  forward_mlp_activation(backend, c, w, layer, t, hooks);
  forward_mlp_output(backend, c, w, layer, t, hooks);
}

}  // namespace tokenmill
