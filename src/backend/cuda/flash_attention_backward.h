// Launcher of the tiled ("flash") attention backward (flash_attention_backward.cu): the math
// of Backend::attention_backward for causal attention with a plain scale over one sequence
// (no window, no soft cap), head_dim <= kFlashMaxHeadDim, f32 operands, as FlashAttention-2
// computes it: the probabilities are recomputed tile by tile, and each key/value tile is
// loaded once into shared memory for a tile of query vectors. Items and tiles as in
// flash_attention_math.h (the query vectors of a kv head's group, row-major); the thread
// geometry of flash_tiles.cuh. Two passes, no atomics (the same bits on every run):
//   dq pass, a block per (item tile, kv head), walking the key tiles up to the diagonal:
//     a first walk gives each item's softmax state (max, sum); D = dout . out; both go to
//     `stats` (AttentionRowStats per (row, head)); the second walk recomputes
//     P = exp(S - max) / sum, dP = dout V^T, dS = P (dP - D) and adds dS K to dq, keys in
//     order; dq = scale * that.
//   dk/dv pass, a block per (key tile, kv head), walking the item tiles from the diagonal to
//     the end (every query head of the group, so dk and dv sum over the group): P and dS
//     again from `stats`, dv += P^T dout, dk += dS^T q, items in order; dk = scale * that.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/attention_math.h"
#include "backend/cuda/flash_attention.h"
#include "core/host_device.h"

namespace tokenmill::cuda {

// Where both passes keep their tiles in dynamic shared memory, in floats: the item tile's
// queries and output gradients Q, dO [items][stride], the key and value tiles K, V
// [keys][stride], and the score-like tiles P and dP (dS once computed)
// [items][keys + 1]; rows of flash_tile_stride(head_dim) floats.
struct FlashBackwardSharedLayout {
  int64_t stride = 0;
  int64_t q = 0, dout = 0, k = 0, v = 0, p = 0, dp = 0;  // offsets
  int64_t floats = 0;                                    // in all
};
TM_HOST_DEVICE FlashBackwardSharedLayout flash_backward_shared_layout(int64_t head_dim) {
  FlashBackwardSharedLayout s;
  s.stride = flash_tile_stride(head_dim);
  s.dout = s.q + kFlashItemsPerTile * s.stride;
  s.k = s.dout + kFlashItemsPerTile * s.stride;
  s.v = s.k + kFlashKeysPerTile * s.stride;
  s.p = s.v + kFlashKeysPerTile * s.stride;
  s.dp = s.p + kFlashItemsPerTile * (kFlashKeysPerTile + 1);
  s.floats = s.dp + kFlashItemsPerTile * (kFlashKeysPerTile + 1);
  return s;
}
inline size_t flash_backward_shared_bytes(int64_t head_dim) {
  return static_cast<size_t>(flash_backward_shared_layout(head_dim).floats) * sizeof(float);
}
// 113.25 KiB at the largest head: within the 227 KiB a block may opt in to on sm_90.

// Backend::attention_backward's operands, all f32: q, out, dout, dq [n, heads, head_dim];
// k, v, dk, dv [n, kv_heads, head_dim]; `stats` holds n * heads AttentionRowStats
// (attention_backward_scratch_bytes).
struct FlashAttentionBackwardLaunch {
  const float *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr, *dout = nullptr;
  float *dq = nullptr, *dk = nullptr, *dv = nullptr;
  AttentionRowStats* stats = nullptr;
  int64_t n = 0, heads = 0, kv_heads = 0, head_dim = 0;  // head_dim <= kFlashMaxHeadDim
  float scale = 1.0f;
};
void launch_flash_attention_backward(const FlashAttentionBackwardLaunch& a, cudaStream_t stream);

}  // namespace tokenmill::cuda
