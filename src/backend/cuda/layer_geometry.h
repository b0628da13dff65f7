// Launch geometry of the layer-op kernels (norm_kernels.cu, softmax_kernels.cu,
// pointwise_kernels.cu, rope_kernels.cu): plain host arithmetic, unit-tested on odd sizes by
// tests/backend/cuda/layer_geometry_test.cpp.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tokenmill::cuda {

// ---------------------------------------------------------------- elementwise

// Elementwise kernels: blocks of kElementwiseThreads threads walk the elements with a grid
// stride, so a capped grid covers any count.
constexpr int kElementwiseThreads = 256;
constexpr int64_t kMaxElementwiseBlocks = int64_t{1} << 16;

// Blocks for `count` elements (0 when there is nothing to do: skip the launch).
inline int64_t elementwise_blocks(int64_t count) {
  return std::min((count + kElementwiseThreads - 1) / kElementwiseThreads, kMaxElementwiseBlocks);
}

// ---------------------------------------------------------------- rows

// Row kernels (norms, softmax): one block per row, its threads strided over the row's d
// elements and reducing with a fixed tree (block_reduce.cuh); blocks stride over the rows.
constexpr int kMaxRowThreads = 512;
constexpr int64_t kMaxRowBlocks = int64_t{1} << 16;

// Threads per row: a power of two from 32 (a warp) to kMaxRowThreads, at least min(d, kMaxRowThreads).
inline int row_threads(int64_t d) {
  int threads = 32;
  while (threads < kMaxRowThreads && threads < d) threads *= 2;
  return threads;
}

inline int64_t row_blocks(int64_t rows) { return std::min(rows, kMaxRowBlocks); }

// ---------------------------------------------------------------- norm parameter gradients

// dweight (and dbias) += a sum over rows, deterministically: rows are cut into `chunks` of
// `rows_per_chunk` consecutive rows (the last may be shorter); a thread per (chunk, column)
// sums its chunk's rows in order, then one thread per column adds the chunks in order. At
// most kMaxNormGradChunks partial rows are kept, whatever the row count.
constexpr int kNormGradThreads = 256;
constexpr int64_t kMinNormGradChunkRows = 32;
constexpr int64_t kMaxNormGradChunks = 256;

struct NormGradGrid {
  int64_t rows_per_chunk = 0, chunks = 0;
  int64_t column_blocks = 0;  // blocks of kNormGradThreads columns
};

inline NormGradGrid norm_grad_grid(int64_t rows, int64_t d) {
  NormGradGrid g;
  g.rows_per_chunk = std::max(kMinNormGradChunkRows, (rows + kMaxNormGradChunks - 1) / kMaxNormGradChunks);
  g.chunks = (rows + g.rows_per_chunk - 1) / g.rows_per_chunk;
  g.column_blocks = (d + kNormGradThreads - 1) / kNormGradThreads;
  return g;
}

// Scratch doubles of a norm backward with `grads` parameter gradients (1: dweight; 2: and
// dbias): (mean, r) per row, then the chunks' partial sums [chunks, grads * d].
inline int64_t norm_backward_scratch_doubles(int64_t rows, int64_t d, int64_t grads) {
  return 2 * rows + norm_grad_grid(rows, d).chunks * grads * d;
}

}  // namespace tokenmill::cuda
