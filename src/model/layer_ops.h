// The parts of a decoder layer that do not touch the KV cache, shared by the
// single-sequence Transformer and the batched PagedTransformer (the rows of x may belong to
// one sequence or to many: every op here is row-wise or a matmul over rows).
#pragma once

#include <span>

#include "backend/backend.h"
#include "core/arena.h"
#include "model/model.h"

namespace tokenmill {

// The activations of one step over up to `rows` tokens, all f32: the scratch the functions
// below read and clobber, plus the rotary frequencies. Sized once, so steps never allocate;
// they live in the arena's memory (the backend's).
struct StepBuffers {
  Tensor inv_freq;                     // [head_dim / 2] (rotary models; empty otherwise)
  Tensor residual, normed, projected;  // [rows, hidden]
  Tensor query, attended;              // [rows, heads * head_dim]
  Tensor new_keys, new_values;         // [rows, kv_heads * head_dim]
  Tensor mlp_a, mlp_b;                 // [rows, intermediate]

  static size_t bytes(const ModelConfig& config, int64_t rows);  // what `arena` needs for them
  static StepBuffers allocate(Arena& arena, const Model& model, int64_t rows);
};

// x [n, hidden] is the token embedding (+ the learned position embedding at `positions`).
// `scratch` [n, hidden] is clobbered.
void embed_tokens(Backend& backend, const Model& model, std::span<const int32_t> ids,
                  std::span<const int32_t> positions, const Tensor& x, const Tensor& scratch);

// h = norm_1(x); q = h W_q (+b), k = h W_k (+b), v = h W_v (+b); with rotary positions q and
// k are rotated at `positions`. q [n, heads, head_dim], k, v [n, kv_heads, head_dim].
void attention_inputs(Backend& backend, const Model& model, const LayerWeights& w, const Tensor& x,
                      const Tensor& h, const Tensor& q, const Tensor& k, const Tensor& v,
                      std::span<const int32_t> positions, const Tensor& inv_freq);

// x += attended W_o (+b).  attended [n, heads * head_dim]; out [n, hidden] is scratch.
void attention_output(Backend& backend, const LayerWeights& w, const Tensor& x, const Tensor& attended,
                      const Tensor& out);

// x += MLP(norm_2(x)): SwiGLU (silu(h W_gate) * h W_up) W_down, or GELU (gelu(h W_up + b) W_down + b).
// Scratch: h [n, hidden], a, b [n, intermediate], out [n, hidden].
void mlp_residual(Backend& backend, const Model& model, const LayerWeights& w, const Tensor& x,
                  const Tensor& h, const Tensor& a, const Tensor& b, const Tensor& out);

}  // namespace tokenmill
