// Argument checks of the KV cache ops (Backend::attention, paged_attention, store_kv and
// attention_backward), shared by every backend so that all of them refuse the same calls
// with the same words. Each throws Error on a bad call and returns the dimensions the op
// needs.
#pragma once

#include <cstdint>
#include <span>

#include "backend/backend.h"
#include "core/tensor.h"

namespace tokenmill::checks {

// q [n, heads, head_dim] over kv heads [.., kv_heads, head_dim].
struct AttentionDims {
  int64_t n = 0, heads = 0, kv_heads = 0, head_dim = 0;

  bool empty() const { return n == 0 || heads == 0 || head_dim == 0; }
};

// attention(): q f32 [n, heads, head_dim]; k_cache, v_cache of one plain dtype and shape
// [capacity, kv_heads, head_dim] with heads % kv_heads == 0; first_pos + n <= capacity;
// out f32 holding q's elements in n rows, overlapping no input; the scores' sinks, if any,
// f32 [heads].
AttentionDims check_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                              int64_t first_pos, const AttentionScores& scores, const Tensor& out);

struct PagedAttentionDims : AttentionDims {
  int64_t num_blocks = 0, block_size = 0;  // of the pools
};

// paged_attention(): as attention() over pools [num_blocks, block_size, kv_heads, head_dim]
// (block_size a power of two); every sequence's row range inside q, the ranges disjoint,
// its block table long enough for first_pos + rows and every block id it uses for those
// positions inside the pool.
PagedAttentionDims check_paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                                         std::span<const Backend::PagedSequence> sequences,
                                         const AttentionScores& scores, const Tensor& out);

struct StoreKvDims {
  int64_t n = 0;      // rows
  int64_t width = 0;  // elements per row (kv_heads * head_dim)
};

// store_kv(): rows f32 [n, kv_heads, head_dim]; pool of a plain dtype [blocks, block_size,
// kv_heads, head_dim], disjoint from rows; n distinct slots inside the pool.
StoreKvDims check_store_kv(const Tensor& rows, std::span<const int64_t> slots, const Tensor& pool);

// attention_backward(): everything f32; q [n, heads, head_dim], k and v [n, kv_heads,
// head_dim] with heads % kv_heads == 0; out, dout and dq hold q's elements, dk and dv k's,
// each with n rows; dq, dk and dv overlap no input and no other output; the scores' scale
// finite, window >= 0, soft cap finite and >= 0.
AttentionDims check_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                       const Tensor& dout, const AttentionScores& scores, const Tensor& dq,
                                       const Tensor& dk, const Tensor& dv);

}  // namespace tokenmill::checks
