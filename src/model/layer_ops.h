// What the two inference passes share around the layer forward (model/layer_forward.h): the
// single-sequence Transformer and the batched PagedTransformer (the rows of x may belong to
// one sequence or to many: every op here is row-wise or a matmul over rows).
#pragma once

#include <array>
#include <functional>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/arena.h"
#include "model/expert_routing.h"
#include "model/layer_forward.h"
#include "model/model.h"

namespace tokenmill {

// The activations of one step over up to `rows` tokens, all f32: the residual stream, the
// pending delta (`projected`, see below), the scratch the functions below read and clobber,
// and the rotary frequencies. Sized once, so steps never allocate; they live in the arena's
// memory (the backend's). With a mixture of experts, the MLP runs over the rows x k slots of
// the experts' inputs (model/expert_routing.h), routed on the host.
struct StepBuffers {
  Tensor inv_freq;                       // [rotary_dim / 2] (rotary models; empty otherwise)
  Tensor sliding_inv_freq;               // the sliding layers' (config.sliding_rope_theta; else empty)
  Tensor residual, normed, projected;    // [rows, hidden]
  Tensor query, attended;                // [rows, heads * head_dim]
  Tensor new_keys, new_values;           // [rows, kv_heads * head_dim]
  Tensor mlp_a, mlp_b;                   // [rows, intermediate]; experts: [rows * k, expert width]
  Tensor router_scores;                  // experts: [rows, experts]
  Tensor expert_inputs, expert_outputs;  // experts: [rows * k, hidden]
  ExpertScratch experts;                 // experts: the step's routing and host-side scratch
  std::function<void(const ExpertRouting&)> routing_observer;  // experts: told each layer's routing

  static size_t bytes(const ModelConfig& config, int64_t rows);  // what `arena` needs for them
  // For steps of up to `rows` tokens in a run of up to `context` positions (model/rope.h).
  static StepBuffers allocate(Arena& arena, const Model& model, int64_t rows, int64_t context);
  // The rotary frequencies of layer `layer`.
  const Tensor& rope_frequencies(const ModelConfig& config, int64_t layer) const {
    return config.sliding_rope(layer) ? sliding_inv_freq : inv_freq;
  }
};

// x [n, hidden] is the token embedding (times sqrt(hidden) where config.scale_embeddings; +
// the learned position embedding at `positions`).
// `scratch` [n, hidden] is clobbered.
void embed_tokens(Backend& backend, const ModelConfig& config, const ModelWeights& weights,
                  std::span<const int32_t> ids, std::span<const int32_t> positions, const Tensor& x,
                  const Tensor& scratch);

// The layers of an inference step (model/layer_forward.h) run over the first n rows of one
// set of StepBuffers, in place: a layer's two residual deltas (the attention's and the
// MLP's) are each added to x by the fused add + norm that follows them (Backend::add_rms_norm
// / add_layer_norm): the attention's by the MLP's input norm, the MLP's by the next layer's
// attention norm (forward_attention's `pending`), and the last layer's by the caller, on the
// rows it needs (add_final_norm). Until then it waits in `projected`.
LayerTensors step_layer_tensors(const ModelConfig& config, const StepBuffers& buffers, int64_t n);

// The inference passes' LayerHooks: the projections of one input in one pass
// (Backend::matmul_shared), and a mixture of experts routed on the host, each expert one
// matmul per projection over the rows routed to it, the step's buffers its scratch. The
// attention is each pass's own (its KV cache).
class StepHooks : public LayerHooks {
 public:
  StepHooks(Backend& backend, const ModelConfig& config, StepBuffers& buffers)
      : backend_(backend), config_(config), buffers_(buffers) {}
  void project(int64_t layer, const Tensor& x, std::span<const Projection> projections) override;
  void experts(int64_t layer, const LayerWeights& w, const Tensor& h, const Tensor& delta) override;

 protected:
  ~StepHooks() = default;
  Backend& backend_;
  const ModelConfig& config_;
  StepBuffers& buffers_;
};

// logits = normed lm_head^T ([n, hidden] -> [n, vocab]), then soft-capped where the model
// caps its final logits (Gemma 2).
void output_logits(Backend& backend, const ModelConfig& config, const ModelWeights& weights,
                   const Tensor& normed, const Tensor& logits);

// After the last layer: x += delta, then out = norm_f(x), over the same rows of each.
void add_final_norm(Backend& backend, const Model& model, const Tensor& x, const Tensor& delta,
                    const Tensor& out);

}  // namespace tokenmill
