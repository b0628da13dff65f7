// Launchers of the training-op kernels (training_kernels.cu) behind plain types, for
// cuda_training_ops.cpp, which checks the arguments first; and the launch geometry of the
// chunked reductions, plain host arithmetic unit-tested by
// tests/backend/cuda/training_math_test.cpp. Every launch is queued on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/training_math.h"

namespace tokenmill::cuda {

// ---------------------------------------------------------------- geometry

// cross_entropy: one block of kCrossEntropyThreads per row (blocks stride over the rows);
// thread t folds the row's elements t, t + threads, ... into its partial, then the block
// merges the partials in a fixed tree. Any vocabulary size: nothing per row is kept whole.
constexpr int kCrossEntropyThreads = 256;
constexpr int64_t kMaxCrossEntropyBlocks = int64_t{1} << 16;

inline int64_t cross_entropy_blocks(int64_t rows) { return std::min(rows, kMaxCrossEntropyBlocks); }

// sum_squares: block b of kSumThreads sums elements [b * chunk, min((b + 1) * chunk, count))
// into partial b (in double, a fixed tree); then one block sums the partials the same way.
// The chunk is a multiple of kSumThreads, at least kMinSumChunk, and large enough that there
// are at most kMaxSumBlocks partials.
constexpr int kSumThreads = 256;
constexpr int64_t kMinSumChunk = int64_t{kSumThreads} * 16;
constexpr int64_t kMaxSumBlocks = 1024;

struct SumGeometry {
  int64_t chunk = 0, blocks = 0;  // blocks = 0: nothing to sum
};

inline SumGeometry sum_geometry(int64_t count) {
  const int64_t per_block = (count + kMaxSumBlocks - 1) / kMaxSumBlocks;
  const int64_t rounded = (per_block + kSumThreads - 1) / kSumThreads * kSumThreads;
  SumGeometry g;
  g.chunk = std::max(kMinSumChunk, rounded);
  g.blocks = (count + g.chunk - 1) / g.chunk;
  return g;
}

// ---------------------------------------------------------------- launchers

// cross_entropy over logits [rows, vocab] f32 with device targets (< vocab, checked; < 0:
// ignored). dlogits may be null, or logits itself.
void launch_cross_entropy(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                          float grad_scale, float* losses, float* dlogits, cudaStream_t stream);

// sum x[i]^2 in double over `count` f32: partials (sum_geometry(count).blocks doubles) and
// total (one double) are device scratch; the result lands in *total.
void launch_sum_squares(const float* x, int64_t count, double* partials, double* total, cudaStream_t stream);

// One AdamW step on `count` elements.
void launch_adamw(float* param, const float* grad, float* m, float* v, int64_t count,
                  const AdamWScalars& scalars, cudaStream_t stream);

}  // namespace tokenmill::cuda
