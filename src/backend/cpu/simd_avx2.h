// Avx2: the 8-lane f32 SIMD wrapper the shared kernels (kernels_impl.h) are written against.
// Included only by kernels_avx2.cpp, which is compiled for the x86-64-v3 baseline.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tokenmill::cpu {
namespace {  // internal linkage: every kernel TU gets its own copy, never mixed by the linker

struct Avx2 {
  using V = __m256;
  static constexpr int kWidth = 8;
  static constexpr int kRegisters = 16;
  // Prefill micro-kernel tile: kTileTokens tokens x (2 * kWidth) weight rows.
  static constexpr int kTileTokens = 6;

  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float v) { return _mm256_set1_ps(v); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V load_bf16(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static V load_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // v rounded to f16 (nearest even) and widened back.
  static V round_f16(V v) { return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); }
  // Stores v rounded to bf16 / f16 exactly as core/dtype.h's f32_to_bf16 / f32_to_f16: nearest
  // even, overflow to infinity, a NaN becomes the quiet NaN of its sign (bf16: its top bits,
  // quieted; f16: sign | 0x7e00, where F16C alone would keep payload bits).
  static void store_bf16(uint16_t* p, V v) {
    const __m256i bits = _mm256_castps_si256(v), high = _mm256_srli_epi32(bits, 16);
    const __m256i bias =
        _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(high, _mm256_set1_epi32(1)));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, bias), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff)),
                                           _mm256_set1_epi32(0x7f800000));
    const __m256i h = _mm256_blendv_epi8(rounded, _mm256_or_si256(high, _mm256_set1_epi32(0x40)), nan);
    // Lanes hold values < 2^16: packus keeps them; per 128-bit half, so permute the halves back.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(h, h), 0xd8);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
  }
  static void store_f16(uint16_t* p, V v) {
    const V nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    const V quiet = copysign(_mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)), v);  // -> sign | 0x7e00
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(_mm256_blendv_ps(v, quiet, nan), _MM_FROUND_TO_NEAREST_INT));
  }

  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }    // a * b + c
  static V fnma(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }  // c - a * b
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V min(V a, V b) { return _mm256_min_ps(a, b); }
  static V abs(V a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  // |mag| with the sign of `sign`.
  static V copysign(V mag, V sign) {
    const V sign_bit = _mm256_set1_ps(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(sign_bit, mag), _mm256_and_ps(sign_bit, sign));
  }
  static V round(V a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // a * 2^n for integer-valued n in [-126, 127].
  static V ldexp(V a, V n) {
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(a, _mm256_castsi256_ps(e));
  }

  static float reduce_add(V a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float reduce_max(V a) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // Transposes the 8 x 8 matrix whose rows are r[0..7].
  static void transpose(V (&r)[kWidth]) {
    V t[8], u[8];
    for (int i = 0; i < 4; ++i) {
      t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; ++i) {  // u[4i + c]: column c (+4 in the high half) of rows 4i..4i+3
      u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
      u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
      u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
      u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
    }
    for (int c = 0; c < 4; ++c) {
      r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
      r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
  }
  // The four horizontal sums {sum(a), sum(b), sum(c), sum(d)}.
  static __m128 reduce_add4(V a, V b, V c, V d) {
    const V ab = _mm256_hadd_ps(a, b);  // a01 a23 b01 b23 | a45 a67 b45 b67
    const V cd = _mm256_hadd_ps(c, d);
    const V abcd = _mm256_hadd_ps(ab, cd);  // a0123 b0123 c0123 d0123 | a4567 ...
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
  }
};

}  // namespace
}  // namespace tokenmill::cpu
