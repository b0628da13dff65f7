// The forward of one decoder layer, written once for every architecture and every caller:
// the inference passes (Transformer, PagedTransformer: one set of step buffers, results
// written in place) and the training pass (each layer's activations kept for its backward,
// or recomputed into one set). What differs between the callers reaches this code through
// LayerHooks (how a projection is computed: with a LoRA adapter's term in training; where
// the attention finds its keys and values: a KV cache or the batch's own sequences; how a
// mixture of experts runs) and LayerTensors (where each activation goes).
//
// With x the layer's input residual [n, hidden]:
//   h1 = norm_1(x)                                        (post-norms: h1 = x)
//   q, k, v = h1 W_q (+b), h1 W_k (+b), h1 W_v (+b)        (q/k norms: q_raw, k_raw, then
//            RMS-normalised per head or whole into q, k; rotary: then q, k rotated at their positions)
//   attended = attention(q, k, v)                          (LayerHooks::attend)
//   o = attended W_o (+b)                                  (o_raw; post-norms: o = norm_1(o_raw);
//                                                           sandwich norms: o = attn_post_norm(o_raw))
//   mid = x + o;  h2 = norm_2(mid)                         (post-norms: h2 = mid)
//   act = silu(h2 W_gate) * h2 W_up  (SwiGLU) | gelu_tanh(h2 W_gate) * h2 W_up (GeGLU)
//       | gelu(h2 W_up + b)  (a: the gate or up projection, b: the gated MLP's up projection)
//   delta = act W_down (+b)                                (down_raw; post-norms: delta =
//                                                           norm_2(down_raw); sandwich:
//                                                           mlp_post_norm(down_raw))
//   and the next layer's x = mid + delta.
// A mixture of experts replaces the MLP by LayerHooks::experts(h2) -> delta.
#pragma once

#include <cstdint>
#include <span>

#include <array>
#include <vector>

#include "backend/backend.h"
#include "model/expert_routing.h"
#include "model/lora.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace tokenmill {

// Where a layer's forward reads and writes, n rows each. Tensors may share memory where a
// caller keeps nothing (inference: q_raw = q, o_raw = o, mid = x, act = a, down_raw =
// delta); an activation the model does not have (h1 with post-norms, q_raw without q/k
// norms, o_raw and down_raw without output norms, b without a gated MLP) may be empty.
struct LayerTensors {
  Tensor x;                // [n, hidden]: the input residual
  Tensor h1;               // [n, hidden]
  Tensor q_raw, k_raw;     // [n, heads * head_dim], [n, kv_heads * head_dim]
  Tensor q, k, v;          // [n, heads | kv_heads, head_dim], after norms and RoPE
  Tensor attended;         // [n, heads, head_dim]
  Tensor o_raw, o;         // [n, hidden]
  Tensor mid, h2;          // [n, hidden]
  Tensor a, b, act;        // [n, intermediate]
  Tensor down_raw, delta;  // [n, hidden]
};

// The attention scores of layer `layer`: ModelConfig::attention_scores, with the layer's sinks.
inline AttentionScores layer_attention_scores(const ModelConfig& c, const LayerWeights& w, int64_t layer) {
  AttentionScores scores = c.attention_scores(layer);
  scores.sinks = optional_tensor(w.attn_sinks);
  return scores;
}

// Whether a norm follows the attention's output projection and the MLP's down projection
// (post-norms: the block's own norm; sandwich norms: its post norm): o_raw and down_raw then
// differ from o and delta.
inline bool normed_block_outputs(const ModelConfig& c) { return c.post_norms || c.sandwich_norms; }

// One projection of a layer's input: y = x W^T (+ bias), the linear layer `target` names.
struct Projection {
  const Tensor* w = nullptr;
  const Tensor* bias = nullptr;  // may be null
  const Tensor* y = nullptr;
  LoraTarget target = LoraTarget::Q;
};

class LayerHooks {
 public:
  // y = x W^T (+ bias) for each projection of layer `layer` (all of one input x).
  virtual void project(int64_t layer, const Tensor& x, std::span<const Projection> projections) = 0;
  // t.attended = attention of t.q over the keys and values of t.k, t.v and whatever
  // precedes them (a KV cache), scored as `scores` (layer_attention_scores).
  virtual void attend(int64_t layer, const AttentionScores& scores, const LayerTensors& t) = 0;
  // delta = the mixture of experts' output of the rows of h (model_config.h).
  virtual void experts(int64_t layer, const LayerWeights& w, const Tensor& h, const Tensor& delta) = 0;

 protected:
  ~LayerHooks() = default;
};

// Where a mixture of experts' forward (experts_forward) writes, over n rows routed to k experts
// each: scores [n, experts]; inputs, outputs [n k, hidden]; gate, up, act [n k, expert width]
// (act may be gate); delta [n, hidden].
struct ExpertTensors {
  Tensor scores, inputs, gate, up, act, outputs, delta;
};

// The host-side state of a mixture of experts' forward, reused so that steps do not allocate
// once grown: the routing, the scores where the host cannot read the backend's memory, the
// chosen experts' [x, w, bias, y] products (no bias: bias.data null) and their matmul_many
// arguments.
struct ExpertScratch {
  ExpertRouting routing;
  std::vector<float> host_scores;
  std::array<std::vector<std::array<Tensor, 4>>, 2> operands;
  std::vector<Backend::MatmulProduct> products;
};

// delta = sum_j weight_j SwiGLU_{expert_j}(h) of every row of h [n, hidden] (model_config.h;
// with config.mlp_bias each projection and the router add their biases, and with
// config.swiglu_limit the SwiGLU is clamped): scores = h W_router^T, routed on the host (route_to_experts,
// into s.routing); inputs = h's rows gathered expert by expert; each chosen expert one matmul per projection
// over its rows (one matmul_many per projection; the other experts' weights are not read); delta = the
// weighted sum of the outputs. Returns the scores as the host reads them.
std::span<const float> experts_forward(Backend& backend, const ModelConfig& c, const LayerWeights& w,
                                       const Tensor& h, const ExpertTensors& t, ExpertScratch& s);

// Rotary models: each row's position and the layer's inverse frequencies.
struct LayerPositions {
  std::span<const int32_t> positions;
  const Tensor* inv_freq = nullptr;
};

// x (+= *pending first, when given: the previous layer's delta, fused with norm_1) through
// h1, q, k, v, attended and o.
void forward_attention(Backend& backend, const ModelConfig& c, const LayerWeights& w, int64_t layer,
                       const LayerTensors& t, const Tensor* pending, const LayerPositions& positions,
                       LayerHooks& hooks);

// mid, h2 and act from x and o; with a mixture of experts, mid, h2 and delta (the MLP is
// then done: forward_mlp_output does nothing).
void forward_mlp_activation(Backend& backend, const ModelConfig& c, const LayerWeights& w, int64_t layer,
                            const LayerTensors& t, LayerHooks& hooks);

// down_raw and delta from act.
void forward_mlp_output(Backend& backend, const ModelConfig& c, const LayerWeights& w, int64_t layer,
                        const LayerTensors& t, LayerHooks& hooks);

// The three above in order: the whole layer.
void forward_layer(Backend& backend, const ModelConfig& c, const LayerWeights& w, int64_t layer,
                   const LayerTensors& t, const Tensor* pending, const LayerPositions& positions,
                   LayerHooks& hooks);

}  // namespace tokenmill
