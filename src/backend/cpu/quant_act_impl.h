// Activation quantisers for the quantized matmul: f32 rows to Q8_0 / Q8_1 / Q8_K levels,
// bit-exact with ggml's reference quantisers (quant::quantize_row):
//   Q8_0, Q8_1 (32 values)  d = amax / 127, id = 1 / d (0 when d = 0),
//                           q = round(x * id), half away from zero (C roundf);
//                           Q8_1 adds s = f16(d * sum(q)) with the unrounded f32 d.
//   Q8_K (256 values)       max = the first value of largest magnitude, iscale = -127 / max,
//                           q = min(127, round(iscale * x)), half to even (ggml's
//                           nearest_int), d = 1 / iscale (f32); all zero when max = 0.
//
// Included only by the quant kernel translation units (quant_kernels_avx2.cpp,
// quant_kernels_avx512.cpp); everything has internal linkage and uses only intrinsics, so
// no function compiled for AVX-512 can be shared with baseline code by the linker.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/quant_kernels.h"
#include "quant/quant_formats.h"

namespace tokenmill::cpu {
namespace {

// f32 <-> f16 bits, round to nearest even (F16C; exact in the f16 -> f32 direction).
inline uint16_t to_f16(float f) {
  return static_cast<uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0));
}
inline float from_f16(uint16_t h) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))); }

inline int hsum8_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

inline float hmax8(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256 abs8(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// roundf(v) exactly for |v| < 2^23: trunc(v), plus sign(v) when the dropped fraction is
// >= 1/2 (the fraction v - trunc(v) is exact).
inline __m256 round_half_away(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 up = _mm256_cmp_ps(abs8(_mm256_sub_ps(v, t)), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
  return _mm256_add_ps(t, _mm256_and_ps(up, one));
}

// Four vectors of 8 int32 in [-128, 127] as 32 int8, in order.
inline void store_levels(__m256i i0, __m256i i1, __m256i i2, __m256i i3, int8_t* dst) {
  // packs work per 128-bit half: the result holds 4-byte groups i0[0..3], i1[0..3], i2[0..3],
  // i3[0..3], i0[4..7], ...; the permutation puts them back in order.
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst),
                      _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

struct Q8Levels {
  float d;  // amax / 127, unrounded
  int sum;  // sum of the 32 levels
};

// One Q8_0 / Q8_1 block: the 32 levels of x[0, 32) and the scale.
inline Q8Levels quantize_block_q8(const float* x, int8_t* qs) {
  __m256 v[4];
  for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(x + 8 * i);
  const float amax =
      hmax8(_mm256_max_ps(_mm256_max_ps(abs8(v[0]), abs8(v[1])), _mm256_max_ps(abs8(v[2]), abs8(v[3]))));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  __m256i q[4];
  for (int i = 0; i < 4; ++i)
    q[i] = _mm256_cvttps_epi32(round_half_away(_mm256_mul_ps(v[i], _mm256_set1_ps(id))));
  store_levels(q[0], q[1], q[2], q[3], qs);
  return {d, hsum8_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])))};
}

// One Q8_K super-block: the 256 levels of x[0, 256), the per-16 sums, and d.
inline float quantize_block_q8k(const float* x, int8_t* qs, int16_t* bsums) {
  __m256 vmax = _mm256_setzero_ps();
  for (int i = 0; i < 32; ++i) vmax = _mm256_max_ps(vmax, abs8(_mm256_loadu_ps(x + 8 * i)));
  const float amax = hmax8(vmax);
  if (amax == 0.0f) {
    std::memset(qs, 0, quant::kBlock256);
    std::memset(bsums, 0, quant::kBlock256 / 16 * sizeof(int16_t));
    return 0.0f;
  }
  // The first value whose magnitude is amax (ggml scans for a strictly larger one).
  float max = 0.0f;
  for (int i = 0; i < 32; ++i) {
    const __m256 v = _mm256_loadu_ps(x + 8 * i);
    const int hits = _mm256_movemask_ps(_mm256_cmp_ps(abs8(v), _mm256_set1_ps(amax), _CMP_EQ_OQ));
    if (hits != 0) {
      max = x[8 * i + __builtin_ctz(static_cast<unsigned>(hits))];
      break;
    }
  }
  const float iscale = -127.0f / max;
  const __m256 scale = _mm256_set1_ps(iscale);
  for (int g = 0; g < 8; ++g) {  // 32 values per group: two sums of 16
    __m256i q[4];
    for (int i = 0; i < 4; ++i) {
      // cvtps rounds half to even, as nearest_int does.
      const __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * g + 8 * i), scale));
      q[i] = _mm256_min_epi32(v, _mm256_set1_epi32(127));
    }
    store_levels(q[0], q[1], q[2], q[3], qs + 32 * g);
    bsums[2 * g] = static_cast<int16_t>(hsum8_i32(_mm256_add_epi32(q[0], q[1])));
    bsums[2 * g + 1] = static_cast<int16_t>(hsum8_i32(_mm256_add_epi32(q[2], q[3])));
  }
  return 1.0f / iscale;
}

// A row in ggml's block layout (the same arithmetic as the panel below).
void quantize_row_blocks(DType act_dtype, const float* x, int64_t k, void* dst) {
  auto* out = static_cast<uint8_t*>(dst);
  if (act_dtype == DType::Q8_K) {
    for (int64_t i = 0; i < k / quant::kBlock256; ++i) {
      quant::BlockQ8_K b;
      b.d = quantize_block_q8k(x + i * quant::kBlock256, b.qs, b.bsums);
      std::memcpy(out + i * static_cast<int64_t>(sizeof b), &b, sizeof b);
    }
    return;
  }
  for (int64_t i = 0; i < k / quant::kBlock32; ++i) {
    int8_t qs[quant::kBlock32];
    const Q8Levels l = quantize_block_q8(x + i * quant::kBlock32, qs);
    if (act_dtype == DType::Q8_1) {
      quant::BlockQ8_1 b;
      b.d = to_f16(l.d);
      b.s = to_f16(static_cast<float>(l.sum) * l.d);
      std::memcpy(b.qs, qs, sizeof qs);
      std::memcpy(out + i * static_cast<int64_t>(sizeof b), &b, sizeof b);
    } else {
      quant::BlockQ8_0 b;
      b.d = to_f16(l.d);
      std::memcpy(b.qs, qs, sizeof qs);
      std::memcpy(out + i * static_cast<int64_t>(sizeof b), &b, sizeof b);
    }
  }
}

// -offset * (sum of the 32 levels of a): the term that turns a dot product of levels
// q + offset with a into one of q with a.
inline int32_t offset_correction(const int8_t* a, int offset) {
  const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
  const __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), av), _mm256_set1_epi16(1));
  return -offset * hsum8_i32(sums);
}

// The offset o in w = d (q - o) that a 32-weight type's kernel folds into the activations
// (MXFP4: its kernel's levels are mxfp4_value(q) + 12, see quant_legacy_impl.h).
template <class Q>
constexpr int weight_offset(DType w) {
  switch (w) {
    case DType::Q4_0: return 8;
    case DType::Q5_0: return 16;
    case DType::Q8_0: return Q::kQ8Offset;
    case DType::MXFP4: return 12;
    default: return 0;
  }
}

// The activation panel (quant_kernels.h) for tokens [t0, t1).
template <class Q>
void prepare_activations(const QuantMatmulArgs& a, int64_t t0, int64_t t1) {
  const int64_t k = a.mm.k;
  const QuantActivations& p = a.act;
  const bool kquant =
      a.mm.w_dtype == DType::Q4_K || a.mm.w_dtype == DType::Q5_K || a.mm.w_dtype == DType::Q6_K;
  for (int64_t t = t0; t < t1; ++t) {
    const float* x = a.mm.x + t * k;
    int8_t* qs = p.qs + t * k;
    if (kquant) {
      const int64_t nb = k / quant::kBlock256;
      for (int64_t i = 0; i < nb; ++i) {
        int16_t* bsums = p.bsums + (t * nb + i) * 16;
        p.d[i * p.ld + t] = quantize_block_q8k(x + i * quant::kBlock256, qs + i * quant::kBlock256, bsums);
        for (int j = 0; j < 8; ++j)
          p.bsums32[(t * nb + i) * 8 + j] = static_cast<int16_t>(bsums[2 * j] + bsums[2 * j + 1]);
      }
      continue;
    }
    const int64_t nb = k / quant::kBlock32;
    const int offset = weight_offset<Q>(a.mm.w_dtype);
    const bool q8_1 = a.mm.w_dtype == DType::Q4_1 || a.mm.w_dtype == DType::Q5_1;
    for (int64_t b = 0; b < nb; ++b) {
      int8_t* qb = qs + b * quant::kBlock32;
      const Q8Levels l = quantize_block_q8(x + b * quant::kBlock32, qb);
      p.d[b * p.ld + t] = from_f16(to_f16(l.d));
      if (q8_1) p.s[b * p.ld + t] = from_f16(to_f16(static_cast<float>(l.sum) * l.d));
      if (offset != 0) p.corr[t * nb + b] = offset_correction(qb, offset);
    }
  }
}

}  // namespace
}  // namespace tokenmill::cpu
