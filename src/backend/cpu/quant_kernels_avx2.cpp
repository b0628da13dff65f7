// The quantized matmul kernels for the x86-64-v3 baseline (AVX2): integer dot products
// through vpmaddubsw (u8 x s8 pairs to int16) and vpmaddwd (int16 pairs to int32).
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/quant_kernels.h"

namespace tokenmill::cpu {
namespace {

struct Avx2Int {
  // Registers: 16 vectors. A packed 32-weight-block tile keeps 4 tokens' int32 and f32
  // accumulators; a k-quant tile 2 tokens' (it also has per-sub-block partial sums).
  static constexpr int kPrefillTokens = 4;
  static constexpr int kKTokens = 2;
  static constexpr int kQ8Offset = 0;
  static constexpr bool kHigh16 = false;  // maddubs would saturate on 16 x levels

  static __m256i dot(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
  static __m256i dot_scaled(__m256i acc, __m256i u, __m256i s, __m256i scale) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scale));
  }
  // Q8_0 x Q8_0 with maddubs: |w| as the unsigned factor and s with w's sign (|w| <= 128,
  // |s| <= 127, so pair sums stay within int16).
  static __m256i q8_weights(__m256i w) { return w; }
  static __m256i dot_q8(__m256i acc, __m256i w, __m256i s) {
    return dot(acc, _mm256_abs_epi8(w), _mm256_sign_epi8(s, w));
  }
  static __m256i high_bits(uint32_t qh) {
    // Byte j gets byte j / 8 of qh, then keeps bit j % 8.
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int>(qh)),
        _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0x0000000000000000));
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
  }
};

}  // namespace
}  // namespace tokenmill::cpu

// The shared kernel templates (after the policy they are instantiated with).
#include "backend/cpu/quant_kernels_impl.h"

namespace tokenmill::cpu {

const QuantKernelTable& quant_kernels_avx2() {
  static const QuantKernelTable table = make_quant_kernel_table<Avx2Int>("avx2");
  return table;
}

}  // namespace tokenmill::cpu
