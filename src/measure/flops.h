// FLOPs and parameters of a decoder-only transformer, counted from its ModelConfig alone.
//
// Notation: L layers, h hidden size, H query heads, K kv heads, d head_dim, I MLP width,
// V vocabulary. One token's forward pass costs
//
//   2 x (multiply-adds of the weight matmuls) + 4 H d a per layer (attention)
//
//  - weight matmuls per layer: q h.Hd; k and v h.Kd each (GQA: K < H makes them smaller);
//    o Hd.h; MLP 2 h.I for GELU (up, down) or 3 h.I for SwiGLU (gate, up, down); with a
//    mixture of E experts the router h.E and the k experts the token runs, 3 h.I each (I an
//    expert's width; the E - k others cost nothing). Their sum over the layers is
//    matmul_parameters() without the lm_head.
//  - lm_head h.V, also when tied to the token embedding (the matrix is then multiplied as the
//    logits matrix); only for the tokens whose logits are computed (`logits_rows`): an
//    inference prefill needs the last token's logits only, training needs every token's.
//  - attention: q.k^T over the a positions the token attends, then probabilities times v:
//    2 H d a multiply-adds per layer = 4 H d a FLOPs. Causal: the token at position p attends
//    a = p + 1 positions, or min(p + 1, w) in a layer with a sliding window of w (Gemma's
//    sliding layers; the CPU kernels still read the positions before the window, at
//    probability 0, which is not counted). A 1024-token sequence thus averages a = 512.5.
//  - not counted: norms, activations, softmax, RoPE, residual adds, biases and embedding
//    gathers: O(h) per token, under 1% here, and left out by llm.c and PaLM alike.
//
// Training costs 3 x forward: the backward pass computes, for every matmul, the gradient
// of its input and of its weight, each a matmul of the forward's size. With N the matmul
// parameters and the causal average a = (T + 1) / 2 this is 6 N + 6 L (H d) (T + 1) per
// token: llm.c's 6 N + 6 L C T (Kaplan et al. 2020, sec. 2.1; llm.c takes N as all
// parameters, embeddings included, a slight over-count). PaLM's 6 N + 12 L H d T (appendix B)
// counts a = T, i.e. no causal saving; we count the positions actually attended.
#pragma once

#include <cstdint>

#include "model/model_config.h"

namespace tokenmill {

// Every parameter of the model: embeddings (token; learned positions), norms, biases, the
// weight matrices, the lm_head unless tied. Equals Model::parameter_count() of loaded weights.
int64_t parameter_count(const ModelConfig& c);

// Multiply-adds of one token through every weight matmul, the lm_head included (= the
// parameters those matmuls read; "N" of the 6 N formula).
int64_t matmul_parameters(const ModelConfig& c);

// Sum over `tokens` consecutive tokens from `first_position` of the positions each attends:
// sum_{p} (p + 1), or with a sliding window w > 0 sum_{p} min(p + 1, w).
int64_t attended_positions(int64_t first_position, int64_t tokens, int64_t window = 0);

// FLOPs of a forward pass of `tokens` tokens appended at `first_position`, of which the last
// `logits_rows` go through the lm_head.
double forward_flops(const ModelConfig& c, int64_t first_position, int64_t tokens, int64_t logits_rows);

// FLOPs of a training step (forward + backward) over a sequence of `tokens` from position 0,
// every token's logits computed: 3 x forward.
double training_flops(const ModelConfig& c, int64_t tokens);

// Model FLOPs utilisation: achieved FLOP/s over peak FLOP/s. Throws Error if peak <= 0.
double mfu(double achieved_flops_per_s, double peak_flops_per_s);

}  // namespace tokenmill
