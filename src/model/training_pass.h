// TrainingPass: the training forward of a batch of sequences (every position, activations
// kept) and its backward, for every architecture the inference Transformer runs
// (model/transformer.h has the per-layer math; this is the same graph, run over B x T
// tokens at once, then differentiated op by op with the Backend's backward ops).
//
// Loss: the mean, over targets >= 0 (a negative target is not scored), of the softmax
// cross-entropy of the logits. The logits are formed, scored and differentiated in row
// chunks (at most kLogitChunkBytes of them at a time), so neither the logits nor the
// probabilities of the whole batch are ever stored.
//
// Weights and gradients are two ModelWeights of the same shapes, f32 (a tied lm_head views
// the token embedding in both, so both uses add into one gradient). forward_backward ADDS
// grad_scale * d(mean loss)/dw into the gradients (gradient accumulation: call it once per
// micro-batch with grad_scale = loss_scale / micro_batches).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/arena.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace tokenmill {

class TrainingPass {
 public:
  static constexpr size_t kLogitChunkBytes = size_t{32} << 20;

  // Buffers for batch x seq_len tokens are allocated here, once. Throws Error if seq_len
  // exceeds the model's context or batch/seq_len < 1.
  TrainingPass(const ModelConfig& config, Backend& backend, int64_t batch, int64_t seq_len);

  struct Result {
    double loss = 0.0;   // mean cross-entropy over the scored targets
    int64_t tokens = 0;  // scored targets
  };
  // inputs, targets: [batch, seq_len] row-major. Throws Error on a size mismatch, an id
  // outside the vocabulary, or no scored target.
  Result forward_backward(const ModelWeights& weights, const ModelWeights& grads,
                          std::span<const int32_t> inputs, std::span<const int32_t> targets,
                          float grad_scale);
  // The loss alone (validation).
  Result evaluate(const ModelWeights& weights, std::span<const int32_t> inputs,
                  std::span<const int32_t> targets);

  size_t activation_bytes() const { return arena_->capacity(); }

 private:
  struct LayerActivations {
    Tensor h1, q, k, v, attended, mid, h2, a, b, act;  // b: SwiGLU's up projection
  };
  class Plan;
  void plan(Plan& p);
  int64_t check(std::span<const int32_t> inputs, std::span<const int32_t> targets) const;
  void forward(const ModelWeights& w, std::span<const int32_t> inputs);
  // Scores the final hidden states chunk by chunk; with grads, also writes dfinal and
  // accumulates the lm_head gradient.
  double score(const ModelWeights& w, const ModelWeights* grads, std::span<const int32_t> targets,
               int64_t count, float grad_scale);
  // Sequence b of a [rows, heads * head_dim] activation, as [seq_len, heads, head_dim].
  Tensor sequence(const Tensor& rows, int64_t b, int64_t heads) const;
  void backward_layer(const ModelWeights& w, const ModelWeights& g, int64_t layer);

  const ModelConfig& config_;
  Backend& backend_;
  int64_t batch_, seq_len_, rows_, logit_rows_;
  float attention_scale_;
  std::vector<int32_t> positions_;  // [rows]: t of each row
  std::optional<Arena> arena_;      // sized by a first pass of plan()
  Tensor inv_freq_tensor_;
  std::vector<Tensor> residual_;  // num_layers + 1 residual streams [rows, hidden]
  std::vector<LayerActivations> layers_;
  Tensor final_, logits_, losses_;
  Tensor dx_, dh_, dtmp_, dq_, dk_, dv_, dattended_, da_, db_, dact_;
};

}  // namespace tokenmill
