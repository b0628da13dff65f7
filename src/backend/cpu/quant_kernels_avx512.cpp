// The quantized matmul kernels for AVX-512 with VNNI: vpdpbusd (4 u8 x s8 products summed
// into each int32 lane) and vpdpwssd (2 int16 x int16), on 256-bit vectors (AVX512VL) with
// 32 vector registers. This file is compiled with -mavx512f/bw/vl/dq/vnni; cpu_backend.cpp
// calls into it only when cpu_features() reports all of them.
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/quant_kernels.h"

namespace tokenmill::cpu {
namespace {

struct VnniInt {
  static constexpr int kPrefillTokens = 8;
  static constexpr int kKTokens = 4;
  static constexpr bool kHigh16 = true;
  // Q8_0 weights are made unsigned (w + 128) for vpdpbusd; the activations' correction
  // vector subtracts 128 sum(a) again.
  static constexpr int kQ8Offset = 128;

  static __m256i dot(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
  static __m256i dot_scaled(__m256i acc, __m256i u, __m256i s, __m256i scale) {
    return _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(u, s), scale);
  }
  static __m256i q8_weights(__m256i w) {
    return _mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80)));
  }
  static __m256i dot_q8(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
  static __m256i high_bits(uint32_t qh) {
    return _mm256_maskz_mov_epi8(static_cast<__mmask32>(qh), _mm256_set1_epi8(0x10));
  }
};

}  // namespace
}  // namespace tokenmill::cpu

// The shared kernel templates (after the policy they are instantiated with).
#include "backend/cpu/quant_kernels_impl.h"

namespace tokenmill::cpu {

const QuantKernelTable& quant_kernels_avx512_vnni() {
  static const QuantKernelTable table = make_quant_kernel_table<VnniInt>("avx512-vnni");
  return table;
}

}  // namespace tokenmill::cpu
