// Quantized matmul kernels for the 32-weight block formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// MXFP4 (activations Q8_0 / Q8_1), written once over an integer-SIMD policy Q (AVX2 or VNNI).
//
// Rows are processed in groups of 8 and every output is one f32 lane (row r of a group in
// lane r). Per (row, token) and block b, with isum_b the exact integer sum of (q - o) * a:
//     acc  = fma(f32(isum_b), d_w[b] * d_a[b], acc)
//     accm = accm + m_w[b] * s_a[b]                      (Q4_1, Q5_1)
//     y    = (acc + accm) + bias
// (quant_kernels.h). Weight offsets o (w = d (q - o)) enter as the panel's per-block
// correction -o * sum(a), added to the integer sum. MXFP4's levels are its doubled E2M1
// values plus 12 (0..24, unsigned for Q::dot, looked up per nibble), so o = 12, and d_w is
// its e8m0 scale 2^(e - 128). Two ways to form isum_b, equal as integers, so results are
// bitwise independent of n, of the tile and of the thread split:
//  - decode (a few tokens): Q4_0 / Q4_1 / MXFP4 transpose the 8 rows' 16 packed bytes to
//    dwords on the fly (like prefill below, without a buffer); the other types take, per row,
//    Q::dot of its 32 levels with the token's 32 levels (8 partial sums) and add them into
//    one lane per row (row_totals). The weights stream from memory once, with the rows
//    two groups ahead prefetched (prefetch_target).
//  - prefill: a group's levels are widened once, transposed (row r in lane r) and kept in
//    a per-thread buffer; then for every token, 8 Q::dot against 4 broadcast activation
//    bytes each sum all 8 rows at once, with no reduction.
//
// Included only by the quant kernel translation units.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/quant_common_impl.h"
#include "backend/cpu/quant_kernels.h"

namespace tokenmill::cpu {
namespace {

constexpr int64_t kGroupRows = 8;

// The f16 pair at the start of block b of 8 rows (`blocks[r]`), as f32: d (and m for
// Q4_1 / Q5_1) of each row, row r in lane r.
struct GroupScales {
  __m256 d, m;
};
template <bool kMin>
inline GroupScales group_scales(const uint8_t* const (&blocks)[8]) {
  const __m256i pairs =
      _mm256_setr_epi32(static_cast<int>(load_u32(blocks[0])), static_cast<int>(load_u32(blocks[1])),
                        static_cast<int>(load_u32(blocks[2])), static_cast<int>(load_u32(blocks[3])),
                        static_cast<int>(load_u32(blocks[4])), static_cast<int>(load_u32(blocks[5])),
                        static_cast<int>(load_u32(blocks[6])), static_cast<int>(load_u32(blocks[7])));
  // Low halves (d) to bytes 0..7 of each 128-bit half, high halves (m) to bytes 8..15.
  const __m256i split =
      _mm256_shuffle_epi8(pairs, _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0, 1,
                                                  4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
  const __m256i ordered = _mm256_permute4x64_epi64(split, 0xd8);  // d0..d7 | m0..m7
  GroupScales s;
  s.d = _mm256_cvtph_ps(_mm256_castsi256_si128(ordered));
  s.m = kMin ? _mm256_cvtph_ps(_mm256_extracti128_si256(ordered, 1)) : _mm256_setzero_ps();
  return s;
}

// 2^(e - 128) for the e8m0 byte e at the start of block b of 8 rows, row r in lane r
// (quant::block::e8m0_half: e < 2 gives the subnormals 0x00200000 << e).
inline GroupScales group_e8m0_scales(const uint8_t* const (&blocks)[8]) {
  const __m256i e = _mm256_setr_epi32(blocks[0][0], blocks[1][0], blocks[2][0], blocks[3][0], blocks[4][0],
                                      blocks[5][0], blocks[6][0], blocks[7][0]);
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
  const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
  const __m256i is_normal = _mm256_cmpgt_epi32(e, _mm256_set1_epi32(1));
  return {_mm256_castsi256_ps(_mm256_blendv_epi8(subnormal, normal, is_normal)), _mm256_setzero_ps()};
}

// MXFP4 nibbles (one per byte) -> mxfp4_value(q) + 12, by a 16-entry byte lookup.
inline __m256i mxfp4_levels(__m256i nibbles) {
  const __m128i values = _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
  return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(values), nibbles);
}

// Per weight type: block bytes, where the packed nibbles start (Q4_0, Q4_1, MXFP4; else -1),
// how a block becomes the 32 bytes u that Q::dot (Q::dot_q8 for Q8_0) takes (levels) and
// how nibbles do (nibble_levels), and the block's scales (scales).
template <class Q, DType W>
struct Legacy;

// The formats whose block starts with f16 d (and m where kMin).
template <bool kMinField>
struct F16Scales {
  static constexpr bool kMin = kMinField;
  static GroupScales scales(const uint8_t* const (&blocks)[8]) { return group_scales<kMin>(blocks); }
};

template <class Q>
struct Legacy<Q, DType::Q4_0> : F16Scales<false> {
  static constexpr int64_t kBytes = 18, kNibbles = 2;
  static constexpr bool kHigh16 = Q::kHigh16;
  static __m256i levels(const uint8_t* b) { return nibbles32(b + 2); }
  static __m256i nibble_levels(__m256i n) { return n; }
  static __m256i dot(__m256i acc, __m256i u, __m256i a) { return Q::dot(acc, u, a); }
};
template <class Q>
struct Legacy<Q, DType::Q4_1> : F16Scales<true> {
  static constexpr int64_t kBytes = 20, kNibbles = 4;
  static constexpr bool kHigh16 = Q::kHigh16;
  static __m256i levels(const uint8_t* b) { return nibbles32(b + 4); }
  static __m256i nibble_levels(__m256i n) { return n; }
  static __m256i dot(__m256i acc, __m256i u, __m256i a) { return Q::dot(acc, u, a); }
};
template <class Q>
struct Legacy<Q, DType::Q5_0> : F16Scales<false> {
  static constexpr int64_t kBytes = 22, kNibbles = -1;
  static constexpr bool kHigh16 = false;
  static __m256i levels(const uint8_t* b) {
    return _mm256_or_si256(nibbles32(b + 6), Q::high_bits(load_u32(b + 2)));
  }
  static __m256i dot(__m256i acc, __m256i u, __m256i a) { return Q::dot(acc, u, a); }
};
template <class Q>
struct Legacy<Q, DType::Q5_1> : F16Scales<true> {
  static constexpr int64_t kBytes = 24, kNibbles = -1;
  static constexpr bool kHigh16 = false;
  static __m256i levels(const uint8_t* b) {
    return _mm256_or_si256(nibbles32(b + 8), Q::high_bits(load_u32(b + 4)));
  }
  static __m256i dot(__m256i acc, __m256i u, __m256i a) { return Q::dot(acc, u, a); }
};
template <class Q>
struct Legacy<Q, DType::Q8_0> : F16Scales<false> {
  static constexpr int64_t kBytes = 34, kNibbles = -1;
  static constexpr bool kHigh16 = false;
  static __m256i levels(const uint8_t* b) {
    return Q::q8_weights(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2)));
  }
  static __m256i dot(__m256i acc, __m256i u, __m256i a) { return Q::dot_q8(acc, u, a); }
};
template <class Q>
struct Legacy<Q, DType::MXFP4> {
  static constexpr int64_t kBytes = 17, kNibbles = 1;
  static constexpr bool kMin = false, kHigh16 = false;
  static __m256i levels(const uint8_t* b) { return mxfp4_levels(nibbles32(b + 1)); }
  static __m256i nibble_levels(__m256i n) { return mxfp4_levels(n); }
  static __m256i dot(__m256i acc, __m256i u, __m256i a) { return Q::dot(acc, u, a); }
  static GroupScales scales(const uint8_t* const (&blocks)[8]) { return group_e8m0_scales(blocks); }
};

// Block b of the 8 rows of a group: rows past `rows` repeat the last one (their lanes are
// computed like any other and never stored). kFull: all 8 rows exist, `row_bytes` apart
// (addressed from two bases, which leaves the compiler registers to spare).
template <bool kFull>
inline void group_blocks(const uint8_t* group, int64_t row_bytes, int64_t rows, int64_t offset,
                         const uint8_t* (&blocks)[8]) {
  if constexpr (kFull) {
    const uint8_t* p0 = group + offset;
    const uint8_t* p4 = p0 + 4 * row_bytes;
    const int64_t rb3 = 3 * row_bytes;
    blocks[0] = p0, blocks[1] = p0 + row_bytes, blocks[2] = p0 + 2 * row_bytes, blocks[3] = p0 + rb3;
    blocks[4] = p4, blocks[5] = p4 + row_bytes, blocks[6] = p4 + 2 * row_bytes, blocks[7] = p4 + rb3;
  } else {
    for (int64_t r = 0; r < kGroupRows; ++r)
      blocks[r] = group + (r < rows ? r : rows - 1) * row_bytes + offset;
  }
}

// The per-(row, token, block) f32 step, shared by both paths so they round alike.
template <bool kMin>
inline void scale_step(__m256i isum, const GroupScales& s, float da, float sa, __m256& acc, __m256& accm) {
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(s.d, _mm256_set1_ps(da)), acc);
  if constexpr (kMin) accm = _mm256_add_ps(accm, _mm256_mul_ps(s.m, _mm256_set1_ps(sa)));
}

// ---------------------------------------------------------------- decode

// y[t0 + t, r0 + r] for the `rows` (<= 8) rows of a group and NT tokens.
template <class Q, DType W, int NT, bool kFull>
void legacy_decode_group(const QuantMatmulArgs& qa, int64_t r0, int64_t rows, int64_t t0,
                         const uint8_t* next) {
  using L = Legacy<Q, W>;
  constexpr bool kOffset = weight_offset<Q>(W) != 0;
  const MatmulArgs& a = qa.mm;
  const QuantActivations& act = qa.act;
  const int64_t k = a.k, nb = k / 32, row_bytes = nb * L::kBytes;
  const uint8_t* group = static_cast<const uint8_t*>(a.w) + r0 * row_bytes;
  __m256 acc[NT], accm[NT];
  for (int t = 0; t < NT; ++t) acc[t] = accm[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_step<kGroupRows * L::kBytes>(next, b);
    const uint8_t* blocks[kGroupRows];
    group_blocks<kFull>(group, row_bytes, rows, b * L::kBytes, blocks);
    const GroupScales s = L::scales(blocks);
    const auto scale = [&](int t, __m256i isum) {
      const float sa = L::kMin ? act.s[b * act.ld + t0 + t] : 0.0f;
      scale_step<L::kMin>(isum, s, act.d[b * act.ld + t0 + t], sa, acc[t], accm[t]);
    };
    const auto correction = [&](int t) {
      return kOffset ? _mm256_set1_epi32(act.corr[(t0 + t) * nb + b]) : _mm256_setzero_si256();
    };
    if constexpr (L::kNibbles >= 0) {
      // 4-bit levels: the 16 packed bytes of each row, transposed to dwords (row r in lane
      // r), so each Q::dot against 4 broadcast activation bytes sums all 8 rows at once.
      // Dword j holds weights 4j..4j+3 (low nibbles) and 16+4j.. (high nibbles); the
      // nibbles become levels once split (L::nibble_levels).
      __m256i q[4];
      for (int r = 0; r < 4; ++r)
        q[r] = _mm256_inserti128_si256(
            _mm256_castsi128_si256(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[r] + L::kNibbles))),
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[r + 4] + L::kNibbles)), 1);
      const __m256i t01l = _mm256_unpacklo_epi32(q[0], q[1]), t01h = _mm256_unpackhi_epi32(q[0], q[1]);
      const __m256i t23l = _mm256_unpacklo_epi32(q[2], q[3]), t23h = _mm256_unpackhi_epi32(q[2], q[3]);
      const __m256i dw[4] = {_mm256_unpacklo_epi64(t01l, t23l), _mm256_unpackhi_epi64(t01l, t23l),
                             _mm256_unpacklo_epi64(t01h, t23h), _mm256_unpackhi_epi64(t01h, t23h)};
      __m256i lo[4], hi[4];  // high nibbles as 16 x level where Q::kHigh16 (divided out below)
      for (int j = 0; j < 4; ++j) {
        lo[j] = L::nibble_levels(_mm256_and_si256(dw[j], _mm256_set1_epi8(0x0F)));
        hi[j] = L::kHigh16
                    ? _mm256_and_si256(dw[j], _mm256_set1_epi8(static_cast<char>(0xF0)))
                    : L::nibble_levels(_mm256_and_si256(_mm256_srli_epi16(dw[j], 4), _mm256_set1_epi8(0x0F)));
      }
      for (int t = 0; t < NT; ++t) {
        const auto* at = reinterpret_cast<const uint8_t*>(act.qs + (t0 + t) * k + b * 32);
        // Four independent chains of two dot products (short dependency chains).
        __m256i sums[4] = {correction(t), _mm256_setzero_si256(), _mm256_setzero_si256(),
                           _mm256_setzero_si256()};
        for (int j = 0; j < 4; ++j) {
          sums[j % 2] = L::dot(sums[j % 2], lo[j], _mm256_set1_epi32(static_cast<int>(load_u32(at + 4 * j))));
          sums[2 + j % 2] =
              L::dot(sums[2 + j % 2], hi[j], _mm256_set1_epi32(static_cast<int>(load_u32(at + 16 + 4 * j))));
        }
        const __m256i sum_hi = _mm256_add_epi32(sums[2], sums[3]);
        scale(t, _mm256_add_epi32(_mm256_add_epi32(sums[0], sums[1]),
                                  L::kHigh16 ? _mm256_srai_epi32(sum_hi, 4) : sum_hi));
      }
    } else {
      // Per row: 8 partial sums of its 32 products, added into one lane per row.
      __m256i u[kGroupRows];
      for (int r = 0; r < kGroupRows; ++r) u[r] = L::levels(blocks[r]);
      for (int t = 0; t < NT; ++t) {
        const __m256i av =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act.qs + (t0 + t) * k + b * 32));
        __m256i dots[kGroupRows];
        for (int r = 0; r < kGroupRows; ++r) dots[r] = L::dot(_mm256_setzero_si256(), u[r], av);
        scale(t, _mm256_add_epi32(row_totals(dots), correction(t)));
      }
    }
  }
  for (int t = 0; t < NT; ++t)
    store_rows(a.y + (t0 + t) * a.m + r0, L::kMin ? _mm256_add_ps(acc[t], accm[t]) : acc[t],
               a.bias != nullptr ? a.bias + r0 : nullptr, rows);
}

template <class Q, DType W>
void legacy_decode(const QuantMatmulArgs& qa, int64_t m0, int64_t m1, int64_t t0, int64_t t1) {
  const int64_t row_bytes = qa.mm.k / 32 * Legacy<Q, W>::kBytes;
  const auto* base = static_cast<const uint8_t*>(qa.mm.w);
  for (int64_t r = m0; r < m1; r += kGroupRows) {
    const int64_t rows = m1 - r < kGroupRows ? m1 - r : kGroupRows;
    const uint8_t* next = prefetch_target(base, r, m1, row_bytes);
    const auto run = [&]<int NT>() {
      if (rows == kGroupRows) {
        legacy_decode_group<Q, W, NT, true>(qa, r, rows, t0, next);
      } else {
        legacy_decode_group<Q, W, NT, false>(qa, r, rows, t0, next);
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

// A packed group: per block b, 8 transposed level vectors then d and m (row r in lane r).
constexpr int64_t kPackedBlockBytes = (kGroupRows + 2) * 32;

template <class Q, DType W>
void legacy_pack_group(const QuantMatmulArgs& qa, int64_t r0, int64_t rows, uint8_t* packed) {
  using L = Legacy<Q, W>;
  const int64_t nb = qa.mm.k / 32, row_bytes = nb * L::kBytes;
  const uint8_t* group = static_cast<const uint8_t*>(qa.mm.w) + r0 * row_bytes;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blocks[kGroupRows];
    group_blocks<false>(group, row_bytes, rows, b * L::kBytes, blocks);
    __m256i u[kGroupRows];
    for (int64_t r = 0; r < kGroupRows; ++r) u[r] = L::levels(blocks[r]);
    transpose_dwords(u);
    auto* out = reinterpret_cast<__m256i*>(packed + b * kPackedBlockBytes);
    for (int j = 0; j < kGroupRows; ++j) _mm256_store_si256(out + j, u[j]);
    const GroupScales s = L::scales(blocks);
    _mm256_store_ps(reinterpret_cast<float*>(out + kGroupRows), s.d);
    _mm256_store_ps(reinterpret_cast<float*>(out + kGroupRows + 1), s.m);
  }
}

template <class Q, DType W, int NT>
void legacy_packed_tile(const QuantMatmulArgs& qa, const uint8_t* packed, int64_t r0, int64_t rows,
                        int64_t t0) {
  using L = Legacy<Q, W>;
  constexpr bool kOffset = weight_offset<Q>(W) != 0;
  const MatmulArgs& a = qa.mm;
  const QuantActivations& act = qa.act;
  const int64_t k = a.k, nb = k / 32;
  __m256 acc[NT], accm[NT];
  for (int t = 0; t < NT; ++t) acc[t] = accm[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const auto* in = reinterpret_cast<const __m256i*>(packed + b * kPackedBlockBytes);
    __m256i isum[NT];
    for (int t = 0; t < NT; ++t)
      isum[t] = kOffset ? _mm256_set1_epi32(act.corr[(t0 + t) * nb + b]) : _mm256_setzero_si256();
    for (int j = 0; j < kGroupRows; ++j) {
      const __m256i u = _mm256_load_si256(in + j);
      for (int t = 0; t < NT; ++t) {
        const __m256i a4 = _mm256_set1_epi32(static_cast<int>(
            load_u32(reinterpret_cast<const uint8_t*>(act.qs + (t0 + t) * k + b * 32 + 4 * j))));
        isum[t] = L::dot(isum[t], u, a4);
      }
    }
    GroupScales s;
    s.d = _mm256_load_ps(reinterpret_cast<const float*>(in + kGroupRows));
    s.m = _mm256_load_ps(reinterpret_cast<const float*>(in + kGroupRows + 1));
    for (int t = 0; t < NT; ++t) {
      const float sa = L::kMin ? act.s[b * act.ld + t0 + t] : 0.0f;
      scale_step<L::kMin>(isum[t], s, act.d[b * act.ld + t0 + t], sa, acc[t], accm[t]);
    }
  }
  for (int t = 0; t < NT; ++t)
    store_rows(a.y + (t0 + t) * a.m + r0, L::kMin ? _mm256_add_ps(acc[t], accm[t]) : acc[t],
               a.bias != nullptr ? a.bias + r0 : nullptr, rows);
}

// Every group of rows is packed once into `work`, then multiplied with all the tokens.
template <class Q, DType W>
void legacy_prefill(const QuantMatmulArgs& qa, int64_t m0, int64_t m1, int64_t t0, int64_t t1,
                    uint8_t* work) {
  constexpr int NT = Q::kPrefillTokens;
  for (int64_t r = m0; r < m1; r += kGroupRows) {
    const int64_t rows = m1 - r < kGroupRows ? m1 - r : kGroupRows;
    legacy_pack_group<Q, W>(qa, r, rows, work);
    int64_t t = t0;
    for (; t + NT <= t1; t += NT) legacy_packed_tile<Q, W, NT>(qa, work, r, rows, t);
    for (; t < t1; ++t) legacy_packed_tile<Q, W, 1>(qa, work, r, rows, t);
  }
}

// Decode for up to kDecodeTokens tokens, else prefill; both give the same bits.
constexpr int64_t kDecodeTokens = 4;

template <class Q, DType W>
void legacy_matmul(const QuantMatmulArgs& qa, int64_t m0, int64_t m1, int64_t t0, int64_t t1, uint8_t* work) {
  if (t1 - t0 <= kDecodeTokens) {
    legacy_decode<Q, W>(qa, m0, m1, t0, t1);
  } else {
    legacy_prefill<Q, W>(qa, m0, m1, t0, t1, work);
  }
}

}  // namespace
}  // namespace tokenmill::cpu
