// The thread geometry and shared-memory tile steps that the tiled attention kernels share
// (flash_attention.cu, the forward; flash_attention_backward.cu). A block has kFlashThreads
// threads; thread (r, c) = (tid / kThreadColumns, tid % kThreadColumns) serves the item
// rows r + kThreadRows i (i < kRowsPerThread) of a tile of kFlashItemsPerTile items, and
// the keys c + kThreadColumns j (j < kKeysPerThread) of a key tile or the head elements
// c + kThreadColumns j. Tiles sit in shared memory as rows of `stride` floats (head_dim
// rounded up to an odd number: the rows of a column sit in different banks), score-like
// tiles [items][kWeightStride]. flash_tile_stride gives the stride.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_types.cuh"
#include "backend/cuda/flash_attention.h"
#include "backend/cuda/paged_addressing.h"

namespace tokenmill::cuda::flash_tiles {

constexpr int kThreadColumns = 8;
constexpr int kThreadRows = kFlashThreads / kThreadColumns;
constexpr int kRowsPerThread = kFlashItemsPerTile / kThreadRows;
constexpr int kKeysPerThread = kFlashKeysPerTile / kThreadColumns;
constexpr int kWeightStride = kFlashKeysPerTile + 1;
static_assert(kThreadRows * kRowsPerThread == kFlashItemsPerTile);
static_assert(kThreadColumns * kKeysPerThread == kFlashKeysPerTile);
static_assert(kFlashThreads >= kFlashItemsPerTile, "a thread per item for the row step");

__device__ inline int thread_row() { return static_cast<int>(threadIdx.x) / kThreadColumns; }
__device__ inline int thread_column() { return static_cast<int>(threadIdx.x) % kThreadColumns; }
__device__ inline int tile_row(int i) { return thread_row() + kThreadRows * i; }

// The position of the tile's item m, or -1 past its items (it sees no key).
__device__ inline int64_t item_position(const FlashTile& tile, int64_t m, int64_t group) {
  return m < tile.items ? flash_item(tile, m, group, 0).position : -1;
}

// The positions of the thread's rows tile_row(i).
__device__ inline void row_positions(const FlashTile& tile, int64_t group,
                                     int64_t (&positions)[kRowsPerThread]) {
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) positions[i] = item_position(tile, tile_row(i), group);
}

// dst rows m < kFlashItemsPerTile: the tile's item vectors of x [.., heads, head_dim] for kv
// head `kv` (rounded by cache_operand when f16: the f16 rule), 0 past its items.
__device__ inline void load_items(const float* x, const FlashTile& tile, int64_t heads, int64_t group,
                                  int64_t kv, int64_t head_dim, bool f16, int64_t stride, float* dst) {
  const int hd = static_cast<int>(head_dim);  // <= kFlashMaxHeadDim: 32-bit tile indices
  for (int e = static_cast<int>(threadIdx.x); e < kFlashItemsPerTile * hd; e += kFlashThreads) {
    const int m = e / hd, d = e - m * hd;
    float value = 0.0f;
    if (m < tile.items) {
      const FlashItem item = flash_item(tile, m, group, kv);
      value = cache_operand(x[(item.q_row * heads + item.head) * hd + d], f16);
    }
    dst[m * stride + d] = value;
  }
}

// Where a block reads its kv head's keys and values: `k`, `v` point at the head's first
// element of cache row 0; cache_row addresses contiguous caches and pools alike.
template <class T>
struct KeySource {
  const T *k, *v;
  const int32_t* table;
  int block_shift;
  int64_t row_stride, head_dim;
};

// dst rows k < keys: the cache rows of positions key_start + k, as f32; rows keys.. are 0
// (nothing past the tile's last position is read).
template <class T>
__device__ void load_key_tile(const KeySource<T>& src, const T* cache, int64_t key_start, int keys,
                              int64_t stride, float* dst) {
  const int hd = static_cast<int>(src.head_dim);  // <= kFlashMaxHeadDim: 32-bit tile indices
  for (int e = static_cast<int>(threadIdx.x); e < kFlashKeysPerTile * hd; e += kFlashThreads) {
    const int k = e / hd, d = e - k * hd;
    dst[k * stride + d] =
        k < keys ? to_float(cache[cache_row(src.table, src.block_shift, key_start + k) * src.row_stride + d])
                 : 0.0f;
  }
}

// out[m][k] = scale * (a[m] . b[k]) for the tile's items m and the key tile's rows k: each a
// dot product over the head in order, rounded, then scaled (as the row-wise kernel's
// warp_score: never fused into what follows).
__device__ inline void tile_products(const float* a, const float* b, int64_t stride, int64_t hd, float scale,
                                     float* out) {
  float dot[kRowsPerThread][kKeysPerThread] = {};
  const int r = thread_row(), c = thread_column();
  for (int64_t d = 0; d < hd; ++d) {
    float x[kRowsPerThread], y[kKeysPerThread];
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) x[i] = a[(r + kThreadRows * i) * stride + d];
#pragma unroll
    for (int j = 0; j < kKeysPerThread; ++j) y[j] = b[(c + kThreadColumns * j) * stride + d];
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i)
#pragma unroll
      for (int j = 0; j < kKeysPerThread; ++j) dot[i][j] = fmaf(x[i], y[j], dot[i][j]);
  }
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i)
#pragma unroll
    for (int j = 0; j < kKeysPerThread; ++j)
      out[(r + kThreadRows * i) * kWeightStride + c + kThreadColumns * j] = __fmul_rn(dot[i][j], scale);
}

// acc[i][j] += sum_{k < keys[i]} w[row_i][k] x[k][col_j] for the thread's rows row_i =
// tile_row(i) and head elements col_j = c + kThreadColumns j, keys in order. w is a score-like
// tile, x a key tile.
template <int kColumns>
__device__ void accumulate_products(const float* w, const float* x, int64_t stride,
                                    const int (&keys)[kRowsPerThread], int64_t hd,
                                    float (&acc)[kRowsPerThread][kColumns]) {
  const int c = thread_column();
  int most_keys = 0;
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) most_keys = max(most_keys, keys[i]);
  for (int k = 0; k < most_keys; ++k) {
    float y[kColumns];
#pragma unroll
    for (int j = 0; j < kColumns; ++j) {
      const int64_t col = c + kThreadColumns * j;
      y[j] = col < hd ? x[k * stride + col] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      if (k >= keys[i]) continue;
      const float weight = w[tile_row(i) * kWeightStride + k];
#pragma unroll
      for (int j = 0; j < kColumns; ++j) acc[i][j] = fmaf(weight, y[j], acc[i][j]);
    }
  }
}

}  // namespace tokenmill::cuda::flash_tiles
