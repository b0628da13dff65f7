// The per-element math of the CUDA attention kernels (attention_kernels.cu), TM_HOST_DEVICE so
// that the CPU tests run it too (tests/backend/cuda/attention_math_test.cpp): the grouped-query
// head mapping, the online-softmax state with its merge, and the f16-cache rounding rule of
// Backend::attention.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#endif
#include "core/dtype.h"

namespace tokenmill::cuda {

// Query head `head` of `heads` reads kv head head / (heads / kv_heads): consecutive query
// heads share a kv head (heads % kv_heads == 0).
TM_HOST_DEVICE int64_t kv_head_of(int64_t head, int64_t heads, int64_t kv_heads) {
  return head / (heads / kv_heads);
}

// The softmax of the scores seen so far: their maximum and sum_p exp(s_p - max). No score
// seen: max = -inf, sum = 0.
struct SoftmaxState {
  float max;
  float sum;
};

TM_HOST_DEVICE SoftmaxState softmax_empty() { return {-INFINITY, 0.0f}; }

// The state of the union of the scores of a and b: each sum is rescaled to the larger max.
// Two empty states merge into an empty one (no -inf - -inf).
TM_HOST_DEVICE SoftmaxState softmax_merge(SoftmaxState a, SoftmaxState b) {
  const float max = fmaxf(a.max, b.max);
  if (max == -INFINITY) return softmax_empty();
  return {max, a.sum * expf(a.max - max) + b.sum * expf(b.max - max)};
}

// The state after one more (finite) score s.
TM_HOST_DEVICE SoftmaxState softmax_add(SoftmaxState state, float s) {
  return softmax_merge(state, SoftmaxState{s, 1.0f});
}

// The softmax probability of score s once `all` holds every score of its row.
TM_HOST_DEVICE float softmax_probability(float s, SoftmaxState all) { return expf(s - all.max) / all.sum; }

// What the attention backward keeps of a query row between its passes: the softmax state of
// all its scores and D = dout . out (dS_p = P_p (dout . v_p - D) S'_p).
struct AttentionRowStats {
  SoftmaxState softmax;
  float expected_dp;  // D
};

// x rounded to the nearest f16 (ties to even), as f32; beyond the f16 range: +-inf.
TM_HOST_DEVICE float round_to_f16(float x) {
#ifdef __CUDA_ARCH__
  return __half2float(__float2half_rn(x));
#else
  return f16_to_f32(f32_to_f16(x));
#endif
}

// The f16-cache rule of Backend::attention: with an f16 cache both operands of every product
// are f16, so q is rounded for the scores and the softmax probabilities for the sum over v
// (accumulation stays f32). f32 and bf16 caches use the f32 operands as they are.
TM_HOST_DEVICE float cache_operand(float x, bool f16_cache) { return f16_cache ? round_to_f16(x) : x; }

}  // namespace tokenmill::cuda
