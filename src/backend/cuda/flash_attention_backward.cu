#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/flash_attention_backward.h"
#include "backend/cuda/flash_tiles.cuh"

namespace tokenmill::cuda {

namespace {

using namespace flash_tiles;

// The dk/dv pass: thread (r, c) owns the key tile's keys r + kThreadRows i (i < kKeyRowsPerThread).
constexpr int kKeyRowsPerThread = kFlashKeysPerTile / kThreadRows;
static_assert(kThreadRows * kKeyRowsPerThread == kFlashKeysPerTile);

// The block's tiles in dynamic shared memory (flash_backward_shared_layout).
struct BackwardShared {
  float *q, *dout, *k, *v, *p, *dp;
  int64_t stride;
};

__device__ BackwardShared backward_shared(float* base, int64_t head_dim) {
  const FlashBackwardSharedLayout s = flash_backward_shared_layout(head_dim);
  return BackwardShared{base + s.q, base + s.dout, base + s.k, base + s.v, base + s.p, base + s.dp, s.stride};
}

// The launch's sequence as tiled work: rows 0..n-1 at positions 0..n-1.
__device__ FlashWork sequence_work(const FlashAttentionBackwardLaunch& a) {
  FlashWork work;
  work.rows = a.n;
  return work;
}

// Kv head `kv`'s keys and values.
__device__ KeySource<float> key_source(const FlashAttentionBackwardLaunch& a, int64_t kv) {
  return KeySource<float>{
      a.k + kv * a.head_dim, a.v + kv * a.head_dim, nullptr, 0, a.kv_heads * a.head_dim, a.head_dim};
}

// Where item m's statistics sit in a.stats: its (row, head).
__device__ int64_t stats_index(const FlashAttentionBackwardLaunch& a, const FlashTile& tile, int64_t m,
                               int64_t kv) {
  const FlashItem item = flash_item(tile, m, a.heads / a.kv_heads, kv);
  return item.q_row * a.heads + item.head;
}

// Statistics for a row past the tile's items: no keys seen, so P = dS = 0 with finite math.
__device__ AttentionRowStats no_row() { return AttentionRowStats{SoftmaxState{0.0f, 1.0f}, 0.0f}; }

// Item m's row of P and dP (scores and dout . v): P = its softmax probabilities, dP becomes
// dS = P (dP - D), for the `seen` keys it sees; P = dS = 0 past them.
__device__ void score_gradients(const BackwardShared& s, int m, int seen, const AttentionRowStats& row) {
  float* p = s.p + m * kWeightStride;
  float* dp = s.dp + m * kWeightStride;
  for (int k = 0; k < kFlashKeysPerTile; ++k) {
    const float prob = k < seen ? softmax_probability(p[k], row.softmax) : 0.0f;
    p[k] = prob;
    dp[k] = prob * (dp[k] - row.expected_dp);
  }
}

// The key tile (and value tile when asked) from key_start, `keys` of its positions present,
// then P = scale * Q K^T and, with values, dP = dO V^T. Barriers before (the previous tile's
// readers are done with K, V, P and dP) and after (P and dP are ready).
__device__ void load_and_score(const BackwardShared& s, const KeySource<float>& src, int64_t key_start,
                               int keys, bool values, float scale) {
  __syncthreads();
  load_key_tile(src, src.k, key_start, keys, s.stride, s.k);
  if (values) load_key_tile(src, src.v, key_start, keys, s.stride, s.v);
  __syncthreads();
  tile_products(s.q, s.k, s.stride, src.head_dim, scale, s.p);
  if (values) tile_products(s.dout, s.v, s.stride, src.head_dim, 1.0f, s.dp);
  __syncthreads();
}

// The dq pass: one block per (item tile, kv head), striding over them. kHeadDimCap (64 or
// 128) bounds head_dim.
template <int kHeadDimCap>
__global__ void __launch_bounds__(kFlashThreads) flash_dq_kernel(FlashAttentionBackwardLaunch a) {
  extern __shared__ float backward_memory[];
  constexpr int kColumns = kHeadDimCap / kThreadColumns;
  const BackwardShared s = backward_shared(backward_memory, a.head_dim);
  const int64_t hd = a.head_dim, group = a.heads / a.kv_heads;
  const FlashWork work = sequence_work(a);
  const int64_t tiles = flash_tile_count(a.n * group, kFlashItemsPerTile);
  const int m = static_cast<int>(threadIdx.x);  // the item whose row step this thread takes
  for (int64_t block = blockIdx.x; block < tiles * a.kv_heads; block += gridDim.x) {
    const int64_t kv = block / tiles;
    const FlashTile tile = flash_tile(work, group, kFlashItemsPerTile, block % tiles);
    const KeySource<float> src = key_source(a, kv);
    const int64_t last = flash_last_position(tile, group),
                  key_tiles = flash_key_tiles(last, kFlashKeysPerTile);
    const int64_t my_position = item_position(tile, m, group);
    int64_t positions[kRowsPerThread];
    row_positions(tile, group, positions);

    __syncthreads();  // the previous block's readers are done with Q and dO
    load_items(a.q, tile, a.heads, group, kv, hd, false, s.stride, s.q);
    load_items(a.dout, tile, a.heads, group, kv, hd, false, s.stride, s.dout);
    __syncthreads();

    // First walk: each item's softmax state over its keys, and D = dout . out (head order).
    AttentionRowStats row = no_row();
    if (m < tile.items) {
      row.softmax = softmax_empty();
      const float* out = a.out + stats_index(a, tile, m, kv) * hd;
      for (int64_t d = 0; d < hd; ++d)
        row.expected_dp = fmaf(s.dout[m * s.stride + d], out[d], row.expected_dp);
    }
    for (int64_t j = 0; j < key_tiles; ++j) {
      const int64_t key_start = j * kFlashKeysPerTile;
      load_and_score(s, src, key_start, flash_keys_seen(last, key_start, kFlashKeysPerTile), false, a.scale);
      if (m < tile.items)
        flash_softmax_step(row.softmax, s.p + m * kWeightStride,
                           flash_keys_seen(my_position, key_start, kFlashKeysPerTile));
    }
    if (m < tile.items) a.stats[stats_index(a, tile, m, kv)] = row;

    // Second walk: dq += dS K, keys in order.
    float acc[kRowsPerThread][kColumns] = {};
    for (int64_t j = 0; j < key_tiles; ++j) {
      const int64_t key_start = j * kFlashKeysPerTile;
      load_and_score(s, src, key_start, flash_keys_seen(last, key_start, kFlashKeysPerTile), true, a.scale);
      if (m < kFlashItemsPerTile)
        score_gradients(s, m, flash_keys_seen(my_position, key_start, kFlashKeysPerTile), row);
      __syncthreads();
      int keys[kRowsPerThread];
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i)
        keys[i] = flash_keys_seen(positions[i], key_start, kFlashKeysPerTile);
      accumulate_products(s.dp, s.k, s.stride, keys, hd, acc);
    }

#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      const int r = tile_row(i);
      if (r >= tile.items) continue;
      float* dq = a.dq + stats_index(a, tile, r, kv) * hd;
#pragma unroll
      for (int j = 0; j < kColumns; ++j) {
        const int64_t col = thread_column() + kThreadColumns * j;
        if (col < hd) dq[col] = acc[i][j] * a.scale;
      }
    }
  }
}

// dk[i][j] += sum_m dS[m][key_i] q[m][col_j] and dv[i][j] += sum_m P[m][key_i] dout[m][col_j]
// over the tile's `items` items in order, for the thread's keys key_i = r + kThreadRows i and
// head elements col_j = c + kThreadColumns j.
template <int kColumns>
__device__ void accumulate_key_gradients(const BackwardShared& s, int64_t items, int64_t hd,
                                         float (&dk)[kKeyRowsPerThread][kColumns],
                                         float (&dv)[kKeyRowsPerThread][kColumns]) {
  const int r = thread_row(), c = thread_column();
  for (int64_t m = 0; m < items; ++m) {
    float q[kColumns], dout[kColumns];
#pragma unroll
    for (int j = 0; j < kColumns; ++j) {
      const int64_t col = c + kThreadColumns * j;
      q[j] = col < hd ? s.q[m * s.stride + col] : 0.0f;
      dout[j] = col < hd ? s.dout[m * s.stride + col] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kKeyRowsPerThread; ++i) {
      const int key = r + kThreadRows * i;
      const float ds = s.dp[m * kWeightStride + key], p = s.p[m * kWeightStride + key];
#pragma unroll
      for (int j = 0; j < kColumns; ++j) {
        dk[i][j] = fmaf(ds, q[j], dk[i][j]);
        dv[i][j] = fmaf(p, dout[j], dv[i][j]);
      }
    }
  }
}

// The dk/dv pass: one block per (key tile, kv head), striding over them; it walks the item
// tiles from the one holding the key tile's first position to the last. kHeadDimCap as above.
template <int kHeadDimCap>
__global__ void __launch_bounds__(kFlashThreads) flash_dkdv_kernel(FlashAttentionBackwardLaunch a) {
  extern __shared__ float backward_memory[];
  constexpr int kColumns = kHeadDimCap / kThreadColumns;
  const BackwardShared s = backward_shared(backward_memory, a.head_dim);
  const int64_t hd = a.head_dim, group = a.heads / a.kv_heads, row_stride = a.kv_heads * hd;
  const FlashWork work = sequence_work(a);
  const int64_t key_tiles = flash_key_tiles(a.n - 1, kFlashKeysPerTile);
  const int64_t item_tiles = flash_tile_count(a.n * group, kFlashItemsPerTile);
  const int m = static_cast<int>(threadIdx.x);  // the item whose row step this thread takes
  for (int64_t block = blockIdx.x; block < key_tiles * a.kv_heads; block += gridDim.x) {
    const int64_t kv = block / key_tiles, key_start = (block % key_tiles) * kFlashKeysPerTile;
    const int keys = flash_keys_seen(a.n - 1, key_start, kFlashKeysPerTile);
    const KeySource<float> src = key_source(a, kv);

    __syncthreads();  // the previous block's readers are done with K and V
    load_key_tile(src, src.k, key_start, keys, s.stride, s.k);
    load_key_tile(src, src.v, key_start, keys, s.stride, s.v);
    float dk[kKeyRowsPerThread][kColumns] = {}, dv[kKeyRowsPerThread][kColumns] = {};
    for (int64_t t = key_start * group / kFlashItemsPerTile; t < item_tiles; ++t) {
      const FlashTile tile = flash_tile(work, group, kFlashItemsPerTile, t);
      __syncthreads();  // the previous tile's readers are done with Q, dO, P and dP
      load_items(a.q, tile, a.heads, group, kv, hd, false, s.stride, s.q);
      load_items(a.dout, tile, a.heads, group, kv, hd, false, s.stride, s.dout);
      __syncthreads();
      tile_products(s.q, s.k, s.stride, hd, a.scale, s.p);
      tile_products(s.dout, s.v, s.stride, hd, 1.0f, s.dp);
      __syncthreads();
      if (m < kFlashItemsPerTile) {
        const AttentionRowStats row = m < tile.items ? a.stats[stats_index(a, tile, m, kv)] : no_row();
        score_gradients(s, m, flash_keys_seen(item_position(tile, m, group), key_start, kFlashKeysPerTile),
                        row);
      }
      __syncthreads();
      accumulate_key_gradients(s, tile.items, hd, dk, dv);
    }

#pragma unroll
    for (int i = 0; i < kKeyRowsPerThread; ++i) {
      const int key = thread_row() + kThreadRows * i;
      if (key >= keys) continue;
      const int64_t at = (key_start + key) * row_stride + kv * hd;
#pragma unroll
      for (int j = 0; j < kColumns; ++j) {
        const int64_t col = thread_column() + kThreadColumns * j;
        if (col >= hd) continue;
        a.dk[at + col] = dk[i][j] * a.scale;
        a.dv[at + col] = dv[i][j];
      }
    }
  }
}

// Above 48 KiB of dynamic shared memory a kernel must opt in (per device: every launch).
template <class Kernel>
void launch_with_shared_memory(Kernel kernel, int64_t blocks, size_t bytes,
                               const FlashAttentionBackwardLaunch& a, cudaStream_t stream) {
  TM_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  kernel<<<static_cast<unsigned>(std::min(blocks, kMaxFlashBlocks)), kFlashThreads, bytes, stream>>>(a);
  TM_CUDA_CHECK_LAUNCH();
}

template <int kHeadDimCap>
void launch_passes(const FlashAttentionBackwardLaunch& a, cudaStream_t stream) {
  const size_t bytes = flash_backward_shared_bytes(a.head_dim);
  const int64_t group = a.heads / a.kv_heads;
  launch_with_shared_memory(flash_dq_kernel<kHeadDimCap>,
                            flash_tile_count(a.n * group, kFlashItemsPerTile) * a.kv_heads, bytes, a, stream);
  launch_with_shared_memory(flash_dkdv_kernel<kHeadDimCap>,
                            flash_key_tiles(a.n - 1, kFlashKeysPerTile) * a.kv_heads, bytes, a, stream);
}

}  // namespace

void launch_flash_attention_backward(const FlashAttentionBackwardLaunch& a, cudaStream_t stream) {
  if (a.n == 0 || a.heads == 0 || a.head_dim == 0) return;
  if (a.head_dim <= 64)
    launch_passes<64>(a, stream);
  else
    launch_passes<kFlashMaxHeadDim>(a, stream);
}

}  // namespace tokenmill::cuda
