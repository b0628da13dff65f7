// Quantized matmul kernels for the 256-weight "k-quants" Q4_K, Q5_K, Q6_K (activations
// Q8_K), written once over an integer-SIMD policy Q (AVX2 or VNNI).
//
// Per (row, token) and super-block i, everything up to one f32 scaling is exact integer
// arithmetic:
//   Q4_K / Q5_K  isum = sum_j sc_j * (q_j . a_j)          (8 sub-blocks j of 32, q >= 0)
//                msum = sum_j mn_j * (sum of a over sub-block j)
//                w = d sc q - dmin mn, so w . a = d d_a isum - dmin d_a msum
//   Q6_K         isum = sum_j sc_j * (q_j . a_j) - 32 sum_j sc_j bsum_j
//                (16 sub-blocks of 16, q in 0..63, w = d sc (q - 32))
// then, one f32 lane per output (row r of a group of 8 in lane r; quant_kernels.h):
//     acc  = fma(f32(isum), d_w * d_a, acc)     accm = fma(f32(msum), dmin_w * d_a, accm)
//     y    = (acc - accm) + bias
// Decode forms isum per row as 8 partial sums (Q::dot_scaled: u8 x s8 pairs as int16 times
// the sub-block scale) and adds them with row_totals; prefill packs a group's levels
// transposed (row r in lane r) with its scales as int32 lanes, so Q::dot against 4 broadcast
// activation bytes sums all 8 rows at once and one multiply per sub-block applies the scales.
// Both give the same integers, hence the same bits.
//
// Included only by the quant kernel translation units.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/quant_kernels.h"
#include "backend/cpu/quant_legacy_impl.h"

namespace tokenmill::cpu {
namespace {

// A shuffle_epi8 mask that broadcasts int16 element e (0..7) of each 128-bit half.
inline __m256i int16_lane_mask(int e) {
  return _mm256_set1_epi16(static_cast<int16_t>((2 * e) | ((2 * e + 1) << 8)));
}

// The decoded scales of one row's super-block.
struct KScales {
  __m256i sc;      // int16 scales, arranged for int16_lane_mask (see each type)
  __m128i mn;      // Q4_K / Q5_K: the 8 mins as int16
  __m256i sc_all;  // Q6_K: the 16 scales as int16, in order
  float d, dmin;
};

// The 8 six-bit scales and mins of a Q4_K / Q5_K block, packed in 12 bytes
// (quant/quant_block_math.h, scale_min_k4): scale j < 4 = bits 0-5 of byte j, min j < 4 = bits 0-5 of
// byte j + 4; for j >= 4 the low 4 bits come from byte j + 4 (scale: low nibble, min: high
// nibble) and the top 2 bits from bits 6-7 of byte j - 4 (scale) or byte j (min).
// Returns scales 0..7 in bytes 0..7 and mins 0..7 in bytes 8..15.
inline __m128i k4_scale_bytes(const uint8_t* block) {
  uint32_t u[3];
  std::memcpy(u, block + 4, 12);
  const uint32_t sc_lo = u[0] & 0x3f3f3f3fu;
  const uint32_t mn_lo = u[1] & 0x3f3f3f3fu;
  const uint32_t sc_hi = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
  const uint32_t mn_hi = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
  return _mm_set_epi32(static_cast<int>(mn_hi), static_cast<int>(mn_lo), static_cast<int>(sc_hi),
                       static_cast<int>(sc_lo));
}

inline KScales k4_scales(const uint8_t* block) {
  const __m256i wide = _mm256_cvtepu8_epi16(k4_scale_bytes(block));  // sc0..7 | mn0..7
  KScales s;
  s.sc = _mm256_permute2x128_si256(wide, wide, 0x00);  // sc0..7 in both halves
  s.mn = _mm256_extracti128_si256(wide, 1);
  s.sc_all = _mm256_setzero_si256();
  const __m128 dd = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(load_u32(block))));
  s.d = _mm_cvtss_f32(dd);
  s.dmin = _mm_cvtss_f32(_mm_movehdup_ps(dd));
  return s;
}

// Q6_K: 16 int8 scales. For the 32 weights of chunk e (0..7) the first 16 use scale 2e and
// the next 16 scale 2e + 1, which maddubs leaves in the low and high 128-bit halves: so
// `sc` holds the even scales in its low half and the odd ones in its high half.
inline KScales k6_scales(const uint8_t* block) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 192));
  const __m128i even_odd =
      _mm_shuffle_epi8(raw, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
  KScales s;
  s.sc = _mm256_cvtepi8_epi16(even_odd);
  s.sc_all = _mm256_cvtepi8_epi16(raw);
  s.mn = _mm_setzero_si128();
  uint16_t h;
  std::memcpy(&h, block + 208, 2);
  s.d = from_f16(h);
  s.dmin = 0.0f;
  return s;
}

template <DType W>
struct KQuant;
template <>
struct KQuant<DType::Q4_K> {
  static constexpr int64_t kBytes = 144;  // d, dmin, scales[12], qs[128]
  static constexpr int kSubBlocks = 8;
  static KScales scales(const uint8_t* b) { return k4_scales(b); }
  // Levels of chunk j (sub-block j): nibbles of qs[32 (j / 2) ...], low for even j.
  static __m256i levels(const uint8_t* b, int j) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16 + 32 * (j / 2)));
    return _mm256_and_si256(j % 2 == 0 ? q : _mm256_srli_epi16(q, 4), _mm256_set1_epi8(0x0F));
  }
};
template <>
struct KQuant<DType::Q5_K> {
  static constexpr int64_t kBytes = 176;  // d, dmin, scales[12], qh[32], qs[128]
  static constexpr int kSubBlocks = 8;
  static KScales scales(const uint8_t* b) { return k4_scales(b); }
  // As Q4_K, plus bit j of qh[l] as bit 4 of weight l of sub-block j.
  static __m256i levels(const uint8_t* b, int j) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 48 + 32 * (j / 2)));
    const __m256i low = _mm256_and_si256(j % 2 == 0 ? q : _mm256_srli_epi16(q, 4), _mm256_set1_epi8(0x0F));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16));
    // Move bit j of every byte to bit 4 (16-bit shifts: bits crossing bytes are masked off).
    const __m256i moved = j <= 4 ? _mm256_sll_epi16(qh, _mm_cvtsi32_si128(4 - j))
                                 : _mm256_srl_epi16(qh, _mm_cvtsi32_si128(j - 4));
    return _mm256_or_si256(low, _mm256_and_si256(moved, _mm256_set1_epi8(0x10)));
  }
};
template <>
struct KQuant<DType::Q6_K> {
  static constexpr int64_t kBytes = 210;  // ql[128], qh[64], scales[16], d
  static constexpr int kSubBlocks = 16;
  static KScales scales(const uint8_t* b) { return k6_scales(b); }
  // Chunk e = 4 h + c of half h: low 4 bits from ql[64 h + 32 (c % 2) ...] (low nibble for
  // c < 2), high 2 bits = bits 2c, 2c + 1 of qh[32 h + l].
  static __m256i levels(const uint8_t* b, int e) {
    const int h = e / 4, c = e % 4;
    const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 64 * h + 32 * (c % 2)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * h));
    const __m256i low = _mm256_and_si256(c < 2 ? ql : _mm256_srli_epi16(ql, 4), _mm256_set1_epi8(0x0F));
    const __m256i moved = c < 2 ? _mm256_sll_epi16(qh, _mm_cvtsi32_si128(4 - 2 * c))
                                : _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * c - 4));
    return _mm256_or_si256(low, _mm256_and_si256(moved, _mm256_set1_epi8(0x30)));
  }
};

// The per-(row, token, super-block) f32 step, shared by both paths so they round alike.
template <bool kMins>
inline void kquant_scale_step(__m256i isum, __m256i msum, __m256 d, __m256 dmin, float da, __m256& acc,
                              __m256& accm) {
  const __m256 vda = _mm256_set1_ps(da);
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, vda), acc);
  if constexpr (kMins) accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dmin, vda), accm);
}

// ---------------------------------------------------------------- decode

template <class Q, DType W, int NT, bool kFull>
void kquant_decode_group(const QuantMatmulArgs& qa, int64_t r0, int64_t rows, int64_t t0,
                         const uint8_t* next) {
  using K = KQuant<W>;
  constexpr bool kMins = W != DType::Q6_K;
  const MatmulArgs& a = qa.mm;
  const QuantActivations& act = qa.act;
  const int64_t k = a.k, nb = k / 256, row_bytes = nb * K::kBytes;
  const uint8_t* group = static_cast<const uint8_t*>(a.w) + r0 * row_bytes;
  __m256 acc[NT], accm[NT];
  for (int t = 0; t < NT; ++t) acc[t] = accm[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    prefetch_step<kGroupRows * K::kBytes>(next, i);
    const uint8_t* blocks[kGroupRows];
    group_blocks<kFull>(group, row_bytes, rows, i * K::kBytes, blocks);
    // One row at a time over the whole super-block (its scales and one accumulator per
    // token live), then the 8 rows' partial sums are added into one lane per row.
    alignas(32) float d[kGroupRows], dmin[kGroupRows];
    __m256i isum[NT][kGroupRows], mins[NT][kGroupRows];
    for (int r = 0; r < kGroupRows; ++r) {
      const KScales sc = K::scales(blocks[r]);
      d[r] = sc.d;
      dmin[r] = sc.dmin;
      for (int t = 0; t < NT; ++t) {
        const int64_t at = (t0 + t) * nb + i;
        if constexpr (kMins) {  // mn_j . (sums of a over sub-block j): 4 partial sums
          const __m128i b32 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(act.bsums32 + at * 8));
          mins[t][r] = _mm256_zextsi128_si256(_mm_madd_epi16(sc.mn, b32));
          isum[t][r] = _mm256_setzero_si256();
        } else {  // Q6_K: -32 sum_j sc_j bsum_j
          const __m256i b16 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act.bsums + at * 16));
          isum[t][r] = _mm256_slli_epi32(
              _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_madd_epi16(sc.sc_all, b16)), 5);
        }
      }
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const __m256i u = K::levels(blocks[r], j);
        const __m256i s = _mm256_shuffle_epi8(sc.sc, int16_lane_mask(j));
        for (int t = 0; t < NT; ++t) {
          const __m256i av =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act.qs + (t0 + t) * k + i * 256 + j * 32));
          isum[t][r] = Q::dot_scaled(isum[t][r], u, av, s);
        }
      }
    }
    const __m256 vd = _mm256_load_ps(d), vdmin = _mm256_load_ps(dmin);
    for (int t = 0; t < NT; ++t)
      kquant_scale_step<kMins>(row_totals(isum[t]), kMins ? row_totals(mins[t]) : _mm256_setzero_si256(), vd,
                               vdmin, act.d[i * act.ld + t0 + t], acc[t], accm[t]);
  }
  for (int t = 0; t < NT; ++t)
    store_rows(a.y + (t0 + t) * a.m + r0, kMins ? _mm256_sub_ps(acc[t], accm[t]) : acc[t],
               a.bias != nullptr ? a.bias + r0 : nullptr, rows);
}

template <class Q, DType W>
void kquant_decode(const QuantMatmulArgs& qa, int64_t m0, int64_t m1, int64_t t0, int64_t t1) {
  const int64_t row_bytes = qa.mm.k / 256 * KQuant<W>::kBytes;
  const auto* base = static_cast<const uint8_t*>(qa.mm.w);
  for (int64_t r = m0; r < m1; r += kGroupRows) {
    const int64_t rows = m1 - r < kGroupRows ? m1 - r : kGroupRows;
    const uint8_t* next = prefetch_target(base, r, m1, row_bytes);
    const auto run = [&]<int NT>() {
      if (rows == kGroupRows) {
        kquant_decode_group<Q, W, NT, true>(qa, r, rows, t0, next);
      } else {
        kquant_decode_group<Q, W, NT, false>(qa, r, rows, t0, next);
      }
    };
    switch (t1 - t0) {
      case 1: run.template operator()<1>(); break;
      case 2: run.template operator()<2>(); break;
      case 3: run.template operator()<3>(); break;
      default: run.template operator()<4>(); break;
    }
  }
}

// ---------------------------------------------------------------- prefill

// A packed super-block of a group (row r in lane r of every vector):
//   levels[8][8]      chunk j, dword c: bytes 4c..4c+3 of the chunk's 32 levels
//   scales[16]        int32 scale of sub-block s (8 sub-blocks of 32, or Q6_K's 16 of 16)
//   pairs[8]          int16 pairs for the bsums products: Q4_K / Q5_K (mn_2p, mn_2p+1),
//                     p < 4; Q6_K (sc_2p, sc_2p+1), p < 8
//   d, dmin           f32
struct KPacked {
  __m256i levels[8][8];
  __m256i scales[16];
  __m256i pairs[8];
  __m256 d, dmin;
};
constexpr int64_t kKPackedBytes = sizeof(KPacked);

template <class Q, DType W>
void kquant_pack_group(const QuantMatmulArgs& qa, int64_t r0, int64_t rows, KPacked* packed) {
  using K = KQuant<W>;
  const int64_t nb = qa.mm.k / 256, row_bytes = nb * K::kBytes;
  const uint8_t* group = static_cast<const uint8_t*>(qa.mm.w) + r0 * row_bytes;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* blocks[kGroupRows];
    group_blocks<false>(group, row_bytes, rows, i * K::kBytes, blocks);
    KPacked& p = packed[i];
    for (int j = 0; j < 8; ++j) {
      __m256i u[kGroupRows];
      for (int r = 0; r < kGroupRows; ++r) u[r] = K::levels(blocks[r], j);
      transpose_dwords(u);
      for (int c = 0; c < 8; ++c) p.levels[j][c] = u[c];
    }
    alignas(32) int32_t scales[16][kGroupRows];
    alignas(32) int16_t pairs[8][kGroupRows][2];
    alignas(32) float d[kGroupRows], dmin[kGroupRows];
    for (int r = 0; r < kGroupRows; ++r) {
      const KScales s = K::scales(blocks[r]);
      d[r] = s.d;
      dmin[r] = s.dmin;
      alignas(16) uint8_t bytes[16] = {};
      alignas(16) int8_t q6[16] = {};
      if constexpr (W == DType::Q6_K) {
        std::memcpy(q6, blocks[r] + 192, 16);
      } else {
        _mm_store_si128(reinterpret_cast<__m128i*>(bytes), k4_scale_bytes(blocks[r]));
      }
      for (int sb = 0; sb < K::kSubBlocks; ++sb) scales[sb][r] = W == DType::Q6_K ? q6[sb] : bytes[sb];
      for (int q = 0; q < 8; ++q)
        for (int h = 0; h < 2; ++h)
          pairs[q][r][h] = W == DType::Q6_K ? q6[2 * q + h] : q < 4 ? bytes[8 + 2 * q + h] : 0;
    }
    for (int sb = 0; sb < 16; ++sb)
      p.scales[sb] = sb < K::kSubBlocks ? _mm256_load_si256(reinterpret_cast<const __m256i*>(scales[sb]))
                                        : _mm256_setzero_si256();
    for (int q = 0; q < 8; ++q) p.pairs[q] = _mm256_load_si256(reinterpret_cast<const __m256i*>(pairs[q]));
    p.d = _mm256_load_ps(d);
    p.dmin = _mm256_load_ps(dmin);
  }
}

// 4 activation bytes of token row `a` at byte j, in every dword.
inline __m256i broadcast4(const int8_t* a) {
  return _mm256_set1_epi32(static_cast<int>(load_u32(reinterpret_cast<const uint8_t*>(a))));
}

template <class Q, DType W, int NT>
void kquant_packed_tile(const QuantMatmulArgs& qa, const KPacked* packed, int64_t r0, int64_t rows,
                        int64_t t0) {
  constexpr bool kMins = W != DType::Q6_K;
  const MatmulArgs& a = qa.mm;
  const QuantActivations& act = qa.act;
  const int64_t k = a.k, nb = k / 256;
  __m256 acc[NT], accm[NT];
  for (int t = 0; t < NT; ++t) acc[t] = accm[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const KPacked& p = packed[i];
    __m256i isum[NT], msum[NT];
    for (int t = 0; t < NT; ++t) {
      // Q4_K / Q5_K: msum = sum_p (mn_2p b32_2p + mn_2p+1 b32_2p+1); Q6_K: isum starts at
      // -32 sum_p (sc_2p b16_2p + sc_2p+1 b16_2p+1).
      const int16_t* bs =
          kMins ? act.bsums32 + ((t0 + t) * nb + i) * 8 : act.bsums + ((t0 + t) * nb + i) * 16;
      __m256i s = _mm256_setzero_si256();
      for (int q = 0; q < (kMins ? 4 : 8); ++q)
        s = _mm256_add_epi32(
            s, _mm256_madd_epi16(p.pairs[q], _mm256_set1_epi32(static_cast<int>(
                                                 load_u32(reinterpret_cast<const uint8_t*>(bs + 2 * q))))));
      msum[t] = kMins ? s : _mm256_setzero_si256();
      isum[t] =
          kMins ? _mm256_setzero_si256() : _mm256_slli_epi32(_mm256_sub_epi32(_mm256_setzero_si256(), s), 5);
    }
    for (int j = 0; j < 8; ++j) {
      __m256i part[NT][2];
      for (int t = 0; t < NT; ++t) part[t][0] = part[t][1] = _mm256_setzero_si256();
      for (int c = 0; c < 8; ++c) {
        const __m256i u = p.levels[j][c];
        for (int t = 0; t < NT; ++t) {
          const __m256i a4 = broadcast4(act.qs + (t0 + t) * k + i * 256 + j * 32 + 4 * c);
          part[t][kMins ? 0 : c / 4] = Q::dot(part[t][kMins ? 0 : c / 4], u, a4);
        }
      }
      for (int t = 0; t < NT; ++t) {
        if constexpr (kMins) {
          isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(part[t][0], p.scales[j]));
        } else {  // Q6_K chunk j: sub-blocks 2j (first 16 weights) and 2j + 1
          isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(part[t][0], p.scales[2 * j]));
          isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(part[t][1], p.scales[2 * j + 1]));
        }
      }
    }
    for (int t = 0; t < NT; ++t)
      kquant_scale_step<kMins>(isum[t], msum[t], p.d, p.dmin, act.d[i * act.ld + t0 + t], acc[t], accm[t]);
  }
  for (int t = 0; t < NT; ++t)
    store_rows(a.y + (t0 + t) * a.m + r0, kMins ? _mm256_sub_ps(acc[t], accm[t]) : acc[t],
               a.bias != nullptr ? a.bias + r0 : nullptr, rows);
}

template <class Q, DType W>
void kquant_prefill(const QuantMatmulArgs& qa, int64_t m0, int64_t m1, int64_t t0, int64_t t1,
                    uint8_t* work) {
  constexpr int NT = Q::kKTokens;
  auto* packed = reinterpret_cast<KPacked*>(work);
  for (int64_t r = m0; r < m1; r += kGroupRows) {
    const int64_t rows = m1 - r < kGroupRows ? m1 - r : kGroupRows;
    kquant_pack_group<Q, W>(qa, r, rows, packed);
    int64_t t = t0;
    for (; t + NT <= t1; t += NT) kquant_packed_tile<Q, W, NT>(qa, packed, r, rows, t);
    for (; t < t1; ++t) kquant_packed_tile<Q, W, 1>(qa, packed, r, rows, t);
  }
}

template <class Q, DType W>
void kquant_matmul(const QuantMatmulArgs& qa, int64_t m0, int64_t m1, int64_t t0, int64_t t1, uint8_t* work) {
  if (t1 - t0 <= kDecodeTokens) {
    kquant_decode<Q, W>(qa, m0, m1, t0, t1);
  } else {
    kquant_prefill<Q, W>(qa, m0, m1, t0, t1, work);
  }
}

}  // namespace
}  // namespace tokenmill::cpu
