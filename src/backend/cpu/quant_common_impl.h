// Helpers shared by the quantized matmul kernel families (quant_legacy_impl.h,
// quant_kquants_impl.h): unaligned loads, nibble widening, prefetching, and the two ways
// of getting one int32 lane per row out of 8 rows' dot products.
//
// Included only by the quant kernel translation units; internal linkage, intrinsics only.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/quant_act_impl.h"
#include "backend/cpu/quant_kernels.h"

namespace tokenmill::cpu {
namespace {

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// 16 bytes of packed nibbles -> 32 levels: low nibbles (weights 0..15), then high (16..31).
inline __m256i nibbles32(const uint8_t* qs) {
  const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  return _mm256_and_si256(_mm256_srlv_epi64(both, _mm256_set_epi64x(4, 4, 0, 0)), _mm256_set1_epi8(0x0F));
}

// Lane r of the result = the sum of the 8 lanes of v[r] (exact int32): a tree of unpack +
// add over pairs of rows, then quads, then the two 128-bit halves.
inline __m256i row_totals(const __m256i (&v)[8]) {
  __m256i pair[4];
  for (int i = 0; i < 4; ++i)  // [v0_0+v0_2, v1_0+v1_2, v0_1+v0_3, v1_1+v1_3 | same for lanes 4..7]
    pair[i] = _mm256_add_epi32(_mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
                               _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
  __m256i quad[2];
  for (int i = 0; i < 2; ++i)  // [rows 4i..4i+3, lanes 0..3 summed | rows 4i..4i+3, lanes 4..7 summed]
    quad[i] = _mm256_add_epi32(_mm256_unpacklo_epi64(pair[2 * i], pair[2 * i + 1]),
                               _mm256_unpackhi_epi64(pair[2 * i], pair[2 * i + 1]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(quad[0], quad[1], 0x20),
                          _mm256_permute2x128_si256(quad[0], quad[1], 0x31));
}

// Transposes 8 rows of 8 dwords: on return u[j] holds dword j of every row (row r in lane r),
// the layout in which vpdpbusd against 4 broadcast activation bytes sums one row per lane.
inline void transpose_dwords(__m256i (&u)[8]) {
  __m256i t[8], s[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(u[2 * i], u[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(u[2 * i], u[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {  // s[4i + c]: dword c (+4 in the high half) of rows 4i..4i+3
    s[4 * i] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    s[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    s[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    s[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    u[c] = _mm256_permute2x128_si256(s[c], s[4 + c], 0x20);
    u[4 + c] = _mm256_permute2x128_si256(s[c], s[4 + c], 0x31);
  }
}

// Prefetches (into L2) the part of a later group of rows (`next`, or none) that matches
// step b of this one, so the rows arrive as one sequential stream ahead of their use.
template <int64_t kStepBytes>
inline void prefetch_step(const uint8_t* next, int64_t b) {
  if (next == nullptr) return;
  const uint8_t* p = next + b * kStepBytes;
  for (int64_t o = 0; o < kStepBytes; o += 64)
    _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T1);
}

// Decode prefetches the rows kPrefetchGroups groups of 8 ahead of the group it multiplies
// (or none near the end of the range): DRAM latency spans more than one group's time.
constexpr int64_t kPrefetchGroups = 2;
inline const uint8_t* prefetch_target(const uint8_t* base, int64_t r, int64_t m1, int64_t row_bytes) {
  const int64_t ahead = r + kPrefetchGroups * 8;
  return ahead + 8 <= m1 ? base + ahead * row_bytes : nullptr;
}

// y[t, r0 .. r0 + rows) = v (+ bias), rows <= 8.
inline void store_rows(float* y, __m256 v, const float* bias, int64_t rows) {
  alignas(32) float out[8];
  _mm256_store_ps(out, v);
  for (int64_t r = 0; r < rows; ++r) y[r] = bias != nullptr ? out[r] + bias[r] : out[r];
}

}  // namespace
}  // namespace tokenmill::cpu
