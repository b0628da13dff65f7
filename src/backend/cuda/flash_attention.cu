#include <algorithm>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/flash_attention.h"
#include "backend/cuda/flash_tiles.cuh"

namespace tokenmill::cuda {

namespace {

using namespace flash_tiles;

// The block's tiles in dynamic shared memory (flash_shared_layout).
struct FlashShared {
  float *q, *k, *v, *w, *rescale;
  int64_t stride;
};

__device__ FlashShared flash_shared(float* base, int64_t head_dim) {
  const FlashSharedLayout s = flash_shared_layout(head_dim);
  return FlashShared{base + s.q, base + s.k, base + s.v, base + s.w, base + s.rescale, s.stride};
}

// The key tile from key_start (`keys` of its positions exist), its values too when asked,
// then W = its scores. Barriers before (the previous tile's readers are done with K, V and W)
// and after (W is ready).
template <class T>
__device__ void load_and_score(const KeySource<T>& src, int64_t key_start, int keys, bool values,
                               const FlashShared& s, float scale) {
  __syncthreads();
  load_key_tile(src, src.k, key_start, keys, s.stride, s.k);
  if (values) load_key_tile(src, src.v, key_start, keys, s.stride, s.v);
  __syncthreads();
  tile_products(s.q, s.k, s.stride, src.head_dim, scale, s.w);
  __syncthreads();
}

// acc = acc * rescale + W V for the thread's rows (which see keys[i] keys of the tile) and its
// head elements c + kThreadColumns j, keys in order.
template <int kColumns>
__device__ void accumulate(const FlashShared& s, const int (&keys)[kRowsPerThread], int64_t hd,
                           float (&acc)[kRowsPerThread][kColumns]) {
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const float rescale = s.rescale[tile_row(i)];
#pragma unroll
    for (int j = 0; j < kColumns; ++j) acc[i][j] *= rescale;
  }
  accumulate_products(s.w, s.v, s.stride, keys, hd, acc);
}

// One block per (tile, kv head), striding over them. kHeadDimCap (64 or 128) bounds head_dim.
template <class T, int kHeadDimCap>
__global__ void __launch_bounds__(kFlashThreads) flash_attention_kernel(FlashAttentionLaunch a) {
  extern __shared__ float flash_memory[];
  constexpr bool kF16 = std::is_same_v<T, __half>;
  constexpr int kColumns = kHeadDimCap / kThreadColumns;
  const FlashShared s = flash_shared(flash_memory, a.head_dim);
  const int64_t hd = a.head_dim, group = a.heads / a.kv_heads, row_stride = a.kv_heads * hd;
  const int m = static_cast<int>(threadIdx.x);  // the item whose row step this thread takes
  for (int64_t block = blockIdx.x; block < a.tiles * a.kv_heads; block += gridDim.x) {
    const int64_t kv = block / a.tiles;
    const FlashTile tile = flash_tile(a.work, group, kFlashItemsPerTile, block % a.tiles);
    const KeySource<T> src{static_cast<const T*>(a.k) + kv * hd,
                           static_cast<const T*>(a.v) + kv * hd,
                           flash_block_table(a.work, tile),
                           a.work.block_shift,
                           row_stride,
                           hd};
    const int64_t last = flash_last_position(tile, group),
                  key_tiles = flash_key_tiles(last, kFlashKeysPerTile);
    const int64_t my_position = item_position(tile, m, group);
    int64_t positions[kRowsPerThread];
    row_positions(tile, group, positions);

    __syncthreads();  // the previous block's readers are done with Q
    load_items(a.q, tile, a.heads, group, kv, hd, kF16, s.stride, s.q);

    // The f16 rule's first walk: the rows' final max and sum.
    SoftmaxState state = softmax_empty();
    if constexpr (kF16) {
      for (int64_t j = 0; j < key_tiles; ++j) {
        const int64_t key_start = j * kFlashKeysPerTile;
        load_and_score(src, key_start, flash_keys_seen(last, key_start, kFlashKeysPerTile), false, s,
                       a.scale);
        if (m < kFlashItemsPerTile)
          flash_softmax_step(state, s.w + m * kWeightStride,
                             flash_keys_seen(my_position, key_start, kFlashKeysPerTile));
      }
    }

    float acc[kRowsPerThread][kColumns] = {};
    for (int64_t j = 0; j < key_tiles; ++j) {
      const int64_t key_start = j * kFlashKeysPerTile;
      load_and_score(src, key_start, flash_keys_seen(last, key_start, kFlashKeysPerTile), true, s, a.scale);
      if (m < kFlashItemsPerTile) {
        float* row = s.w + m * kWeightStride;
        const int seen = flash_keys_seen(my_position, key_start, kFlashKeysPerTile);
        if constexpr (kF16) {
          flash_f16_probabilities(row, seen, state);
          s.rescale[m] = 1.0f;
        } else {
          s.rescale[m] = flash_softmax_step(state, row, seen);
        }
      }
      __syncthreads();
      int keys[kRowsPerThread];
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i)
        keys[i] = flash_keys_seen(positions[i], key_start, kFlashKeysPerTile);
      accumulate(s, keys, hd, acc);
    }

    __syncthreads();  // the last tile's readers are done with the rescale factors
    if (m < kFlashItemsPerTile) s.rescale[m] = state.sum;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      const int row = tile_row(i);
      if (row >= tile.items) continue;
      const FlashItem item = flash_item(tile, row, group, kv);
      float* out = a.out + (item.q_row * a.heads + item.head) * hd;
      const float sum = s.rescale[row];
#pragma unroll
      for (int j = 0; j < kColumns; ++j) {
        const int64_t col = thread_column() + kThreadColumns * j;
        if (col < hd) out[col] = flash_output(acc[i][j], sum, kF16);
      }
    }
  }
}

template <class T, int kHeadDimCap>
void launch_with_cap(const FlashAttentionLaunch& a, int64_t blocks, cudaStream_t stream) {
  const auto kernel = flash_attention_kernel<T, kHeadDimCap>;
  const size_t bytes = flash_shared_bytes(a.head_dim);
  // Above 48 KiB of dynamic shared memory a kernel must opt in (per device: every launch).
  TM_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  kernel<<<static_cast<unsigned>(blocks), kFlashThreads, bytes, stream>>>(a);
  TM_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_flash_attention(const FlashAttentionLaunch& a, cudaStream_t stream) {
  const int64_t blocks = std::min(a.tiles * a.kv_heads, kMaxFlashBlocks);
  if (blocks == 0 || a.head_dim == 0) return;
  with_storage_type(a.cache_dtype, "attention", [&](auto zero) {
    using T = decltype(zero);
    if (a.head_dim <= 64)
      launch_with_cap<T, 64>(a, blocks, stream);
    else
      launch_with_cap<T, kFlashMaxHeadDim>(a, blocks, stream);
  });
}

}  // namespace tokenmill::cuda
