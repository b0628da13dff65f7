// Launchers of the CUDA attention kernels (attention_kernels.cu): causal grouped-query
// attention over contiguous caches and paged pools (one kernel, paged_addressing.h), stores
// into a pool, and the attention backward. Raw device pointers, checked arguments
// (cuda_attention_ops.cpp checks them), queued on `stream`.
//
// Each (query row, head) is one work item of a block of kAttentionWarps warps: warp w walks
// the positions w, w + kAttentionWarps, ... in order, and the warps' partial results are
// combined in warp order, so the arithmetic of an item depends only on its own inputs (not
// on the batch or the grid): deterministic, and contiguous == paged bit for bit.
//
// A row of more than kSplitPositions positions is cut into splits (attention_splits.h) that
// separate blocks walk, in three passes over per-split scratch; its arithmetic still depends
// only on its own inputs.
//
// This is the reference path, and decode's kernel; prefill and the training forward use the
// tiled kernel (flash_attention.h), as flash_attention_plan.h chooses (TOKENMILL_CUDA_ATTENTION).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/attention_math.h"
#include "backend/cuda/attention_splits.h"
#include "backend/cuda/paged_addressing.h"
#include "core/dtype.h"

namespace tokenmill::cuda {

// A lane holds head elements lane + 32 c in registers: head_dim up to 256.
inline constexpr int64_t kMaxAttentionHeadDim = 256;
inline constexpr int kAttentionWarps = 8;
inline constexpr int kAttentionThreads = 32 * kAttentionWarps;
// Blocks stride over the work items beyond this many (a valid gridDim.x).
inline constexpr int64_t kMaxAttentionBlocks = int64_t{1} << 20;
static_assert(kMaxAttentionBlocks <= 0x7fffffff);

// Blocks for `items` work items (0: nothing to launch).
inline int64_t attention_blocks(int64_t items) { return std::min(items, kMaxAttentionBlocks); }

// out[row, h, :] = sum_p softmax_p(score(q[row, h, :], k[p, kv(h), :])) v[p, kv(h), :] over the
// positions p <= position the window lets the row see (attended_positions), score = scale * (q . k)
// then with softcap > 0 softcap * tanh(score / softcap), and with sinks the head's sink in the
// softmax's denominator: Backend::AttentionScores. For the work
// rows of `work`, every head; the f16 rule of Backend::attention with an f16 cache.
struct AttentionLaunch {
  const float* q = nullptr;  // [.., heads, head_dim]
  const void* k = nullptr;   // cache rows [.., kv_heads, head_dim] of cache_dtype
  const void* v = nullptr;
  DType cache_dtype = DType::F32;
  float* out = nullptr;                           // like q
  int64_t work_rows = 0;                          // query rows (AttentionWork)
  int64_t heads = 0, kv_heads = 0, head_dim = 0;  // head_dim <= kMaxAttentionHeadDim
  float scale = 1.0f;
  int64_t window = 0;            // 0: every position
  float softcap = 0.0f;          // 0: no cap
  const float* sinks = nullptr;  // [heads]: each head's sink logit joins its softmax's denominator
  AttentionWork work;
};

// The split plan of launch `a` when its rows sit at positions `min_position` ... `max_position`.
inline SplitPlan attention_split_plan(const AttentionLaunch& a, int64_t min_position, int64_t max_position) {
  return split_plan(a.work_rows, a.heads, a.head_dim, attended_positions(min_position, a.window),
                    attended_positions(max_position, a.window), sizeof(SoftmaxState));
}

// Queues the launch; `scratch` holds plan.scratch_bytes of device memory (null when 0), plan
// from attention_split_plan(a, ...).
void launch_attention(const AttentionLaunch& a, const SplitPlan& plan, void* scratch, cudaStream_t stream);

// pool[slots[r] * width + e] = rows[r * width + e] rounded to `pool_dtype` (nearest even).
void launch_store_kv(const float* rows, const int64_t* slots, int64_t n, int64_t width, void* pool,
                     DType pool_dtype, cudaStream_t stream);

// Backend::attention_backward, all f32: q, out, dout, dq [n, heads, head_dim]; k, v, dk, dv
// [n, kv_heads, head_dim]; scores as AttentionLaunch's. `scratch` holds attention_backward_scratch_bytes(n,
// heads): each row's AttentionRowStats, written by the dq pass and read by the dk/dv pass (the
// tiled backward's passes share them the same way).
struct AttentionBackwardLaunch {
  const float *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr, *dout = nullptr;
  float *dq = nullptr, *dk = nullptr, *dv = nullptr;
  void* scratch = nullptr;
  int64_t n = 0, heads = 0, kv_heads = 0, head_dim = 0;  // head_dim <= kMaxAttentionHeadDim
  float scale = 1.0f;
  int64_t window = 0;    // 0: every position
  float softcap = 0.0f;  // 0: no cap
};
size_t attention_backward_scratch_bytes(int64_t n, int64_t heads);
void launch_attention_backward(const AttentionBackwardLaunch& a, cudaStream_t stream);

}  // namespace tokenmill::cuda
