// TrainingPass: the training forward of a batch of sequences (every position, activations
// kept) and its backward. The forward is the inference passes' own layer code
// (model/layer_forward.h), run over B x T tokens at once with every activation kept, then
// differentiated op by op with the Backend's backward ops.
//
// Loss: the mean, over targets >= 0 (a negative target is not scored), of the softmax
// cross-entropy of the logits. The logits are formed, scored and differentiated in row
// chunks (at most kLogitChunkBytes of them at a time), so neither the logits nor the
// probabilities of the whole batch are ever stored.
//
// Weights and gradients are two ModelWeights of the same shapes, f32 (a tied lm_head views
// the token embedding in both, so both uses add into one gradient), in the backend's memory
// (ModelWeights::memory says so; a LoRA adapter and its gradients live there too), as are
// every buffer of the pass: the host reaches them only through DeviceMemory's copies (the
// rope frequencies and the LoRA scale in, each logit chunk's losses out), so the pass runs
// on a GPU backend as on the CPU. Inputs and targets are host spans (Backend's convention). forward_backward
// ADDS grad_scale * d(mean loss)/dw into the gradients (gradient accumulation: call it once per micro-batch
// with grad_scale = loss_scale / micro_batches).
//
// LoRA (model/lora.h): with an adapter, every targeted linear layer computes
// y = x W^T (+ b) + s (x A^T) B^T; the model's weights are then frozen (no gradient is formed
// for them, they may be bf16/f16) and only the adapter's A and B get gradients:
//   u = s (x A^T)          (kept from the forward; s applied as a product with s I [rank, rank],
//                           the backend having no scale op: rank^2 flops per row)
//   dB += dy^T u,  du = dy B,  dA += (s du)^T x,  dx += (s du) A.
//
// Activation memory (activation_bytes()). Kept (Activations::Kept): every layer's residual
// input and its activations (h1, q, k, v after RoPE, with q/k norms also q and k before
// their norm, attended, mid, h2 (with post-norms o_raw and down_raw instead of h1 and h2; with
// sandwich norms o_raw and down_raw too),
// the MLP's a, b, act, the LoRA u's): (L + 1) x rows x hidden + L x one
// layer's activations, plus the backward's buffers (one layer's gradients, the logit chunk). Recomputed
// (Activations::Recomputed): the forward keeps only the residual stream, (L + 1) x rows x hidden, and writes
// every layer's activations into ONE layer's buffers; the backward of layer l first reruns l's forward from
// its kept input into those buffers, up to the MLP's act (the down projection's output is not differentiated
// through, only its LoRA u is recomputed), then differentiates it. So (L - 1) x one layer's activations are
// saved, for about one more forward of every layer
// (+33% of the training flops: forward 1, backward 2, recomputation 1, less the down
// projections). The ops and their inputs are the same, so the loss and every gradient are
// bit-identical to Kept.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/arena.h"
#include "model/layer_forward.h"
#include "model/lora.h"
#include "model/model_config.h"
#include "model/router_gradient.h"
#include "model/weights.h"

namespace tokenmill {

class TrainingPass final : private LayerHooks {
 public:
  static constexpr size_t kLogitChunkBytes = size_t{32} << 20;

  enum class Activations : uint8_t { Kept, Recomputed };  // see "Activation memory" above

  // Buffers for batch x seq_len tokens are allocated here, once (with those of `lora`'s
  // targets when it is enabled). Throws Error if seq_len exceeds the model's context or
  // batch/seq_len < 1.
  TrainingPass(const ModelConfig& config, Backend& backend, int64_t batch, int64_t seq_len,
               const LoraConfig& lora = {}, Activations activations = Activations::Kept);

  struct Result {
    // Mean cross-entropy over the scored targets, plus the router's load-balancing loss
    // where the model adds one (router_loss; transformers' loss, with output_router_logits).
    double loss = 0.0;
    int64_t tokens = 0;        // scored targets
    double router_loss = 0.0;  // router_aux_loss_coef x the load-balancing loss (router_gradient.h)
  };
  // inputs, targets: [batch, seq_len] row-major. Throws Error on weights outside the
  // backend's memory, a size mismatch, an id outside the vocabulary, or no scored target.
  Result forward_backward(const ModelWeights& weights, const ModelWeights& grads,
                          std::span<const int32_t> inputs, std::span<const int32_t> targets,
                          float grad_scale);
  // LoRA: the model frozen, the adapter's gradients added into adapter_grads (same shapes).
  // The adapter's targets must be those of the LoraConfig given to the constructor.
  Result forward_backward(const ModelWeights& weights, const LoraWeights& adapter,
                          const LoraWeights& adapter_grads, std::span<const int32_t> inputs,
                          std::span<const int32_t> targets, float grad_scale);
  // The loss alone (validation), with the adapter when given.
  Result evaluate(const ModelWeights& weights, std::span<const int32_t> inputs,
                  std::span<const int32_t> targets, const LoraWeights* adapter = nullptr);

  // Every buffer of the pass: the activations as above, one layer's gradients, the logit chunk.
  size_t activation_bytes() const { return arena_->capacity(); }

 private:
  struct LayerActivations {
    // b: a gated MLP's up projection; a mixture of experts' a, b, act have a row per slot
    Tensor h1, q, k, v, attended, mid, h2, a, b, act;
    Tensor scores, inputs,
        outputs;             // a mixture of experts': the router's scores, each slot's input and output
    Tensor q_raw, k_raw;     // q/k norms: the projections before their norm (q, k after it)
    Tensor o_raw, down_raw;  // normed block outputs: the attention's and the MLP's outputs before their norm
    std::array<Tensor, kLoraTargetCount> lora_u;  // u = s (x A^T) [rows, rank] per target
  };
  class Plan;
  void plan(Plan& p);
  // Throws Error unless the weights are in the backend's memory and the batch is valid;
  // returns the number of scored targets.
  int64_t check(const ModelWeights& weights, std::span<const int32_t> inputs,
                std::span<const int32_t> targets) const;
  void forward(const ModelWeights& w, std::span<const int32_t> inputs);
  // Where layer l's forward (model/layer_forward.h) reads and writes: residual_[l], acts(l),
  // and the scratch dtmp_ for the attention's and the MLP's deltas.
  LayerTensors layer_tensors(int64_t layer);
  // LayerHooks: each projection through linear() (with the adapter's term); the attention of
  // each sequence of the batch over itself.
  void project(int64_t layer, const Tensor& x, std::span<const Projection> projections) override;
  void attend(int64_t layer, const AttentionScores& scores, const LayerTensors& t) override;
  void experts(int64_t layer, const LayerWeights& w, const Tensor& h, const Tensor& delta) override;
  // A mixture of experts' backward: dh_ = d(the MLP's input h2) given dx_ = d(its delta); the
  // experts' and the router's gradients accumulated (the load-balancing loss's too).
  void experts_backward(const LayerWeights& w, const LayerWeights& g, int64_t layer);
  // The routing of layer l (one for every layer when Recomputed).
  ExpertScratch& expert_scratch(int64_t layer) {
    return experts_[recompute_ ? 0 : static_cast<size_t>(layer)];
  }
  // A tensor of the backend's memory as host floats: itself, or copied into `storage`.
  std::span<const float> host_floats(const Tensor& t, std::vector<float>& storage) const;
  // The buffers of layer l's activations (one set for every layer when Recomputed).
  LayerActivations& acts(int64_t layer) { return layers_[recompute_ ? 0 : static_cast<size_t>(layer)]; }
  // Sets the adapter of the coming call (null: none), checking its shapes against lora_.
  void use_adapter(const LoraWeights* adapter, const LoraWeights* adapter_grads);
  // grads == nullptr: the model is frozen (only the adapter, if any, gets gradients).
  Result run_backward(const ModelWeights& weights, const ModelWeights* grads, std::span<const int32_t> inputs,
                      std::span<const int32_t> targets, float grad_scale);
  // y = x W^T (+ b), plus the adapter's term when `target` of `layer` is adapted.
  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y, int64_t layer,
              LoraTarget target);
  // Its backward: dx overwritten; dw, db accumulated when present (not null); the adapter's
  // dA, dB accumulated.
  void linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& dx, const Tensor& dw,
                       const Tensor& db, int64_t layer, LoraTarget target);
  // The adapter's u = s (x A^T) of `target` of `layer` into acts(layer); false (nothing
  // done) when that target is not adapted in this call.
  bool lora_u(const Tensor& x, int64_t layer, LoraTarget target);
  // A norm's weight (which = 0) or bias (1) gradient, or a scratch sink when the model is
  // frozen (the backend's norm backward always accumulates them).
  Tensor norm_grad(const Tensor& grad, int64_t which) const {
    return grad.data != nullptr ? grad : norm_sinks_.slice_rows(which, 1).reshaped({config_.hidden_size});
  }
  // The same for a q/k norm's weight gradient [width].
  Tensor qk_norm_grad(const Tensor& grad, int64_t width) const {
    return grad.data != nullptr ? grad : qk_norm_sink_.slice_rows(0, width);
  }
  // The attention's and the MLP's inputs in layer l: norm_1(x) and norm_2(mid), or with
  // post-norms x and mid themselves.
  const Tensor& attention_input(int64_t layer) {
    return config_.post_norms ? residual_[static_cast<size_t>(layer)] : acts(layer).h1;
  }
  const Tensor& mlp_input(int64_t layer) { return config_.post_norms ? acts(layer).mid : acts(layer).h2; }
  // The result of a forward whose cross-entropy is `cross_entropy`: the router's loss added.
  Result scored(double cross_entropy, int64_t tokens) const;
  // Scores the final hidden states chunk by chunk; with grads, also writes dfinal and
  // accumulates the lm_head gradient.
  double score(const ModelWeights& w, const ModelWeights* grads, std::span<const int32_t> targets,
               int64_t count, float grad_scale);
  // A [rows, width * k] activation as rows of `width` (what a q/k norm normalises).
  static Tensor norm_rows(const Tensor& t, int64_t width) { return t.reshaped({t.numel() / width, width}); }
  // Sequence b of a [rows, heads * head_dim] activation, as [seq_len, heads, head_dim].
  Tensor sequence(const Tensor& rows, int64_t b, int64_t heads) const;
  void backward_layer(const ModelWeights& w, const ModelWeights& g, int64_t layer);
  // d(a block's output) given dx_ = d(the residual it is added to): dx_ itself, or where a
  // norm follows the block's output projection (post-norms: the block's own norm; sandwich
  // norms: its post norm) the backward of norm(raw), written to dtmp_, the norm's gradients
  // (in g) accumulated. The attention's block, or with `mlp` the MLP's.
  const Tensor& block_output_grad(const Tensor& raw, const LayerWeights& w, const LayerWeights& g, bool mlp);
  // dx_ += d(the residual x) through the block's input, given dh_ = d(input): the norm's
  // backward of x (its gradients accumulated), or with post-norms dh_ itself (the input is x).
  void add_block_input_grad(const Tensor& x, const Tensor& weight, const Tensor& dweight,
                            const Tensor& dbias);

  const ModelConfig& config_;
  Backend& backend_;
  LoraConfig lora_;
  bool recompute_;
  const LoraWeights* adapter_ = nullptr;        // of the current call
  const LoraWeights* adapter_grads_ = nullptr;  // of the current forward_backward
  ModelWeights frozen_;                         // all-null gradients of a frozen model
  int64_t batch_, seq_len_, rows_, logit_rows_;
  std::vector<int32_t> positions_;             // [rows]: t of each row
  std::vector<float> host_losses_;             // a logit chunk's losses, where the host cannot read losses_
  std::optional<Arena> arena_;                 // sized by a first pass of plan()
  Tensor inv_freq_tensor_, sliding_inv_freq_;  // the latter: sliding layers of their own RoPE base
  // The rotary frequencies of layer `layer`.
  const Tensor& rope_frequencies(int64_t layer) const {
    return config_.sliding_rope(layer) ? sliding_inv_freq_ : inv_freq_tensor_;
  }
  std::vector<Tensor> residual_;          // num_layers + 1 residual streams [rows, hidden]
  std::vector<LayerActivations> layers_;  // L of them, or 1 when Recomputed
  // Mixtures of experts: each layer's routing (L, or 1 when Recomputed), the load-balancing
  // statistics of the forward (counted in forward(), not in a recomputation), the backward's
  // scratch: d(gathered rows) x 2 [rows k, hidden], d(router scores) [rows, experts], and host
  // copies.
  std::vector<ExpertScratch> experts_;
  std::optional<LoadBalance> load_balance_;
  bool counting_routes_ = false;
  float grad_scale_ = 1.0f;  // of the current forward_backward
  Tensor dslots_, dslots_b_, dscores_;
  std::vector<int32_t> identity_slots_;
  std::vector<float> slot_weights_, dweights_, host_p_, host_dscores_, host_a_, host_b_;
  Tensor final_, logits_, losses_;
  Tensor dlogits_;  // a logit chunk's gradient, where the final soft cap's backward needs the logits after it
  Tensor dx_, dh_, dtmp_, dq_, dk_, dv_, dattended_, da_, db_, dact_;
  Tensor dq_raw_, dk_raw_;                            // q/k norms: d(projections before the norm)
  Tensor norm_sinks_;                                 // [2, hidden]
  Tensor qk_norm_sink_;                               // [widest q/k norm], q/k norms
  Tensor lora_scale_, lora_t_, lora_du_, lora_wide_;  // s I [rank, rank]; [rows, rank] x 2; [rows, widest]
};

}  // namespace tokenmill
