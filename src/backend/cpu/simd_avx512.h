// Avx512: the 16-lane f32 SIMD wrapper the shared kernels (kernels_impl.h) are written
// against. Included only by the AVX-512 translation units (kernels_avx512.cpp and the
// amx_*.cpp files, compiled with -mavx512f/bw/vl/dq), whose functions run only after
// cpu_features says the CPU has those extensions.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tokenmill::cpu {
namespace {  // internal linkage: every kernel TU gets its own copy, never mixed by the linker

struct Avx512 {
  using V = __m512;
  static constexpr int kWidth = 16;
  static constexpr int kRegisters = 32;
  // Prefill micro-kernel tile: kTileTokens tokens x (2 * kWidth) weight rows.
  static constexpr int kTileTokens = 12;

  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float v) { return _mm512_set1_ps(v); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V load_bf16(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static V load_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  // v rounded to f16 (nearest even) and widened back.
  static V round_f16(V v) { return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); }
  // Stores v rounded to bf16 / f16 exactly as core/dtype.h's f32_to_bf16 / f32_to_f16 (see
  // Avx2::store_bf16).
  static void store_bf16(uint16_t* p, V v) {
    const __m512i bits = _mm512_castps_si512(v), high = _mm512_srli_epi32(bits, 16);
    const __m512i bias =
        _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(high, _mm512_set1_epi32(1)));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, bias), 16);
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)),
                                                  _mm512_set1_epi32(0x7f800000));
    const __m512i h = _mm512_mask_blend_epi32(nan, rounded, _mm512_or_si512(high, _mm512_set1_epi32(0x40)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(h));  // lanes < 2^16: exact
  }
  static void store_f16(uint16_t* p, V v) {
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    const V quiet = copysign(_mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000)), v);  // -> sign | 0x7e00
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(_mm512_mask_blend_ps(nan, v, quiet), _MM_FROUND_TO_NEAREST_INT));
  }

  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }    // a * b + c
  static V fnma(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }  // c - a * b
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V min(V a, V b) { return _mm512_min_ps(a, b); }
  static V abs(V a) { return _mm512_abs_ps(a); }
  // |mag| with the sign of `sign`.
  static V copysign(V mag, V sign) {
    const V sign_bit = _mm512_set1_ps(-0.0f);
    return _mm512_or_ps(_mm512_andnot_ps(sign_bit, mag), _mm512_and_ps(sign_bit, sign));
  }
  static V round(V a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // a * 2^n for integer-valued n in [-126, 127].
  static V ldexp(V a, V n) { return _mm512_scalef_ps(a, n); }

  static float reduce_add(V a) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(a),
                                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float reduce_max(V a) { return _mm512_reduce_max_ps(a); }
  // Transposes the 16 x 16 matrix whose rows are r[0..15].
  static void transpose(V (&r)[kWidth]) {
    V t[16], u[16];
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4i + c], 128-bit lane L: column 4L + c of rows 4i..4i+3.
    for (int i = 0; i < 4; ++i) {
      u[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
      u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
      u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
      u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
    }
    // Gather the four 128-bit pieces of each column: lanes {0, 2} (0x88) or {1, 3} (0xdd).
    for (int c = 0; c < 4; ++c) {
      t[c] = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);           // columns c, 8+c; rows 0-7
      t[4 + c] = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xdd);       // columns 4+c, 12+c; rows 0-7
      t[8 + c] = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);  // columns c, 8+c; rows 8-15
      t[12 + c] = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xdd);
    }
    for (int c = 0; c < 4; ++c) {
      r[c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88);
      r[8 + c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0xdd);
      r[4 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0x88);
      r[12 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0xdd);
    }
  }
  // The four horizontal sums {sum(a), sum(b), sum(c), sum(d)}.
  static __m128 reduce_add4(V a, V b, V c, V d) {
    const auto fold = [](V v) {
      return _mm256_add_ps(_mm512_castps512_ps256(v),
                           _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    };
    const __m256 ab = _mm256_hadd_ps(fold(a), fold(b));
    const __m256 cd = _mm256_hadd_ps(fold(c), fold(d));
    const __m256 abcd = _mm256_hadd_ps(ab, cd);
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
  }
};

}  // namespace
}  // namespace tokenmill::cpu
