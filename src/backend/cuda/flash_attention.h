// Launcher of the tiled ("flash") causal attention kernel (flash_attention.cu): the math of
// Backend::attention and Backend::paged_attention (flash_attention_math.h gives the
// recurrence and the tile geometry), for head_dim <= kFlashMaxHeadDim. Raw device pointers,
// checked arguments (cuda_attention_ops.cpp checks them and chooses the kernel:
// flash_attention_plan.h), queued on `stream`.
//
// A block of kFlashThreads threads serves kFlashItemsPerTile items (query vectors of one kv
// head's group) and walks the key tiles of kFlashKeysPerTile positions up to its last item's
// position, each loaded once into shared memory for the whole tile:
//   scores S = Q K^T: thread (r, c) = (tid / 8, tid % 8) computes rows r + 16 i, keys c + 8 j
//     (i, j < 4), each a dot product over the head in order, then times scale;
//   the row step: thread m < kFlashItemsPerTile owns item m's softmax state
//     (flash_softmax_step, or flash_f16_probabilities in the f16 rule's second walk);
//   O = O * rescale + W V: thread (r, c) owns rows r + 16 i, head elements c + 8 j, and adds
//     its keys in order.
// f32 arithmetic on CUDA cores; bf16 / f16 cache values widened to f32 in shared memory.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/flash_attention_math.h"
#include "core/dtype.h"
#include "core/host_device.h"

namespace tokenmill::cuda {

inline constexpr int kFlashThreads = 128;
inline constexpr int kFlashItemsPerTile = 64;  // 16 thread rows x 4
inline constexpr int kFlashKeysPerTile = 32;   // 8 thread columns x 4
inline constexpr int64_t kFlashMaxHeadDim = 128;
// Blocks stride over the (tile, kv head) pairs beyond this many (a valid gridDim.x).
inline constexpr int64_t kMaxFlashBlocks = int64_t{1} << 20;

// Where the kernel keeps its tiles in dynamic shared memory, in floats: the tile's queries
// Q [items][stride], the key and value tiles K, V [keys][stride], the scores / weights
// W [items][keys + 1] and one rescale factor per item; rows of `stride` floats.
// The floats between consecutive rows of a tile in shared memory: head_dim rounded up to an
// odd number, so the rows of a column sit in different banks.
TM_HOST_DEVICE int64_t flash_tile_stride(int64_t head_dim) {
  return head_dim % 2 == 0 ? head_dim + 1 : head_dim;
}

struct FlashSharedLayout {
  int64_t stride = 0;
  int64_t q = 0, k = 0, v = 0, w = 0, rescale = 0;  // offsets
  int64_t floats = 0;                               // in all
};
TM_HOST_DEVICE FlashSharedLayout flash_shared_layout(int64_t head_dim) {
  FlashSharedLayout s;
  s.stride = flash_tile_stride(head_dim);
  s.k = s.q + kFlashItemsPerTile * s.stride;
  s.v = s.k + kFlashKeysPerTile * s.stride;
  s.w = s.v + kFlashKeysPerTile * s.stride;
  s.rescale = s.w + kFlashItemsPerTile * (kFlashKeysPerTile + 1);
  s.floats = s.rescale + kFlashItemsPerTile;
  return s;
}
inline size_t flash_shared_bytes(int64_t head_dim) {
  return static_cast<size_t>(flash_shared_layout(head_dim).floats) * sizeof(float);
}

// out[row, h, :] = sum_{p <= position} softmax_p(scale * q[row, h, :] . k[p, kv(h), :]) v[p, kv(h), :]
// for the items of `tiles` tiles of `work`, every kv head; the f16 rule of Backend::attention
// with an f16 cache.
struct FlashAttentionLaunch {
  const float* q = nullptr;  // [.., heads, head_dim]
  const void* k = nullptr;   // cache rows [.., kv_heads, head_dim] of cache_dtype
  const void* v = nullptr;
  DType cache_dtype = DType::F32;
  float* out = nullptr;                           // like q
  int64_t heads = 0, kv_heads = 0, head_dim = 0;  // head_dim <= kFlashMaxHeadDim
  float scale = 1.0f;
  int64_t tiles = 0;  // of kFlashItemsPerTile items
  FlashWork work;
};
void launch_flash_attention(const FlashAttentionLaunch& a, cudaStream_t stream);

}  // namespace tokenmill::cuda
