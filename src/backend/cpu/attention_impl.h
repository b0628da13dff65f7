// The CPU attention kernels (KernelTable::attention), templates over a SIMD wrapper `S` as
// in kernels_impl.h, whose rules this file follows. Included by kernel_table_impl.h and by
// amx_attention.cpp (compiled with AVX-512 too) only.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backend/backend.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/kernels_impl.h"

namespace tokenmill::cpu {
namespace {

// ---------------------------------------------------------------- attention

// Loads of head rows: plain vector loads when kFull (whole vectors), else bounds-checked.
template <class S, bool kFull>
typename S::V load_head(const float* p, int64_t lanes) {
  if constexpr (kFull) {
    return S::load(p);
  } else {
    return load_n<S>(p, lanes);
  }
}
template <class S, DType D, bool kFull>
typename S::V load_head_w(const Storage<D>* p, int64_t lanes) {
  if constexpr (kFull) {
    return load_w<S, D>(p);
  } else {
    return load_w_n<S, D>(p, lanes);
  }
}

// Where a kv head's cache row of position p starts: row(p). Both policies address the same
// elements and the kernels below visit them in the same order, so attention over a paged
// cache equals attention over a contiguous one holding the same rows, bit for bit.
template <DType D>
struct ContiguousRows {  // position p at base + p * stride
  const Storage<D>* base;
  int64_t stride;
  const Storage<D>* row(int64_t p) const { return base + p * stride; }
};
template <DType D>
struct PagedRows {  // position p at row p & mask of block blocks[p >> shift]
  const Storage<D>* base;
  int64_t stride;
  const int32_t* blocks;
  int shift;
  int64_t mask;  // 2^shift - 1
  const Storage<D>* row(int64_t p) const {
    return base + ((static_cast<int64_t>(blocks[p >> shift]) << shift) + (p & mask)) * stride;
  }
};

// Consecutive cache rows of one kv head are n_kv_heads * head_dim apart: too sparse for the
// hardware prefetchers, so the kernels prefetch (into L2) the row kPrefetchRows positions
// ahead: +30% single-thread at 4096 positions, neutral at 512 (T0 or 16 rows: less).
constexpr int64_t kPrefetchRows = 32;

template <DType D>
void prefetch_row(const Storage<D>* row, int64_t hd) {
  const auto* bytes = reinterpret_cast<const char*>(row);
  for (int64_t b = 0; b < hd * static_cast<int64_t>(sizeof(Storage<D>)); b += 64)
    _mm_prefetch(bytes + b, _MM_HINT_T1);
}

// The query rows of one work item: query heads [h0, h0 + heads) of tokens [t0, t0 + count /
// heads) of one sequence, all reading one kv head. Row r is token t0 + r / heads, head h0 +
// r % heads; it attends to positions [0, len(r)), or with a sliding window [first(r), len(r)),
// and keeps its scores at scores + r * stride. Rows are in token order, so their lengths and
// first positions never decrease.
struct QueryRows {
  const AttentionArgs* a;
  int64_t t0, h0, heads, count, stride;
  float* scores;

  int64_t token(int64_t r) const { return t0 + r / heads; }
  int64_t len(int64_t r) const { return a->first_pos + token(r) + 1; }
  int64_t first(int64_t r) const {
    return AttentionScores(a->scale, a->window, a->softcap).first_position(len(r) - 1);
  }
  // The first position any row reads: first(0) rounded down to a block of scores and a
  // segment of values (the blocks and segments wholly before a row's window are skipped).
  int64_t first_read() const { return first(0) / kAttentionValueSegment * kAttentionValueSegment; }
  int64_t offset(int64_t r) const { return (token(r) * a->n_heads + h0 + r % heads) * a->head_dim; }
  const float* q(int64_t r) const { return a->q + offset(r); }
  float* out(int64_t r) const { return a->out + offset(r); }
  float* scores_of(int64_t r) const { return scores + r * stride; }
};

// scale * q . k for one position: one vector sum over head_dim, reduced alone (S::reduce_add).
template <class S, DType D, bool kFull>
float score_alone(const float* q, const Storage<D>* k, int64_t hd, float scale) {
  typename S::V s = S::zero();
  for (int64_t i = 0; i < hd; i += S::kWidth)
    s = S::fma(load_head<S, kFull>(q + i, hd - i), load_head_w<S, D, kFull>(k + i, hd - i), s);
  return S::reduce_add(s) * scale;
}

// Positions per block of attention_scores: a multiple of 4 (its whole fours) and a divisor
// of kAttentionValueSegment (so a segment's scores are whole blocks).
constexpr int64_t kScoreBlock = 64;
static_assert(kAttentionValueSegment % kScoreBlock == 0 && kScoreBlock % 4 == 0);

// scores_r[p] = scale * q_r . k_p for every row r and p < len(r), p in [p_begin, p_end)
// (p_begin a multiple of kScoreBlock). Keys are taken in blocks of kScoreBlock positions that
// stay in L1 while every row uses them, four positions at a time (one four-way horizontal
// sum); a row's positions past the last whole four of its length are summed one at a time.
// Each score's arithmetic depends only on its row's length, not on the other rows of the
// item nor on the range. Blocks wholly before a row's window are skipped (softmax_scores
// gives those positions probability 0 without reading them).
template <class S, DType D, bool kFull, class Rows>
void attention_scores(const QueryRows& rows, const Rows& keys, int64_t hd, float scale, int64_t p_begin,
                      int64_t p_end) {
  using V = typename S::V;
  constexpr int64_t W = S::kWidth;
  constexpr int64_t kBlock = kScoreBlock;
  const __m128 scale4 = _mm_set1_ps(scale);
  const int64_t longest = rows.len(rows.count - 1);
  for (int64_t p0 = p_begin; p0 < longest && p0 < p_end; p0 += kBlock) {
    for (int64_t r = 0; r < rows.count; ++r) {
      const int64_t len = rows.len(r);
      if (p0 >= len || p0 + kBlock <= rows.first(r)) continue;
      const int64_t p1 = p0 + kBlock < len ? p0 + kBlock : len;
      const float* qr = rows.q(r);
      float* sr = rows.scores_of(r);
      int64_t p = p0;
      for (; p + 4 <= p1; p += 4) {
        const Storage<D>* k[4] = {keys.row(p), keys.row(p + 1), keys.row(p + 2), keys.row(p + 3)};
        if (r == 0)
          for (int64_t ahead = p + kPrefetchRows; ahead < p + 4 + kPrefetchRows && ahead < longest; ++ahead)
            prefetch_row<D>(keys.row(ahead), hd);
        V s[4] = {S::zero(), S::zero(), S::zero(), S::zero()};
        for (int64_t i = 0; i < hd; i += W) {
          const V qv = load_head<S, kFull>(qr + i, hd - i);
          for (int k4 = 0; k4 < 4; ++k4)
            s[k4] = S::fma(qv, load_head_w<S, D, kFull>(k[k4] + i, hd - i), s[k4]);
        }
        _mm_storeu_ps(sr + p, _mm_mul_ps(S::reduce_add4(s[0], s[1], s[2], s[3]), scale4));
      }
      for (; p < p1; ++p) sr[p] = score_alone<S, D, kFull>(qr, keys.row(p), hd, scale);
    }
  }
}

// acc[j] += scores[j][p] v_p[i0, i0 + NV kWidth) for p in [p0, p1), p ascending; kAll: every
// row j takes every p, else only those below len[j].
template <class S, DType D, int HG, int NV, bool kFull, bool kAll, class Rows>
[[gnu::always_inline]] inline void accumulate_values(typename S::V (&acc)[HG][NV], const Rows& values,
                                                     const float* const (&scores)[HG],
                                                     const int64_t (&len)[HG], int64_t p0, int64_t p1,
                                                     int64_t longest, int64_t hd, int64_t i0) {
  using V = typename S::V;
  constexpr int64_t W = S::kWidth;
  for (int64_t p = p0; p < p1; ++p) {
    const Storage<D>* v = values.row(p) + i0;
    if (p + kPrefetchRows < longest) {
      const Storage<D>* ahead = values.row(p + kPrefetchRows) + i0;
      for (int c = 0; c < NV; ++c) _mm_prefetch(reinterpret_cast<const char*>(ahead + c * W), _MM_HINT_T1);
    }
    V vv[NV];
    for (int c = 0; c < NV; ++c) vv[c] = load_head_w<S, D, kFull>(v + c * W, hd - i0 - c * W);
    for (int j = 0; j < HG; ++j) {
      if (!kAll && p >= len[j]) continue;
      const V s = S::set1(scores[j][p]);
      for (int c = 0; c < NV; ++c) acc[j][c] = S::fma(s, vv[c], acc[j][c]);
    }
  }
}

// out_r[i0, i0 + NV kWidth) for the HG rows r0.. (lanes past head_dim are neither read nor
// written): the segment sums of positions [p_begin, p_end) (p_begin a multiple of
// kAttentionValueSegment), the first of them stored, the others added in order. A row
// gets no sum from a segment past its length. Each segment sum runs over its p in order
// from zero, whatever rows share the pass. Segments wholly before the rows' windows are
// skipped: their sums are +0 (probability-0 products added to +0), which adds nothing, so
// the bits are those of summing them; a range wholly before them stores that +0.
template <class S, DType D, int HG, int NV, bool kFull, class Rows>
void attention_values(const Rows& values, const QueryRows& rows, int64_t r0, int64_t hd, int64_t i0,
                      int64_t p_begin, int64_t p_end) {
  using V = typename S::V;
  constexpr int64_t W = S::kWidth;
  const float* scores[HG];
  int64_t len[HG];
  for (int j = 0; j < HG; ++j) {
    scores[j] = rows.scores_of(r0 + j);
    len[j] = rows.len(r0 + j);
  }
  const int64_t longest = len[HG - 1];  // rows are in token order: len[0] is the shortest
  const int64_t start = std::max(p_begin, rows.first(r0) / kAttentionValueSegment * kAttentionValueSegment);
  if (start >= longest || start >= p_end) {
    for (int j = 0; j < HG; ++j)
      if (p_begin < len[j])
        for (int c = 0; c < NV; ++c) store_n<S>(rows.out(r0 + j) + i0 + c * W, S::zero(), hd - i0 - c * W);
    return;
  }
  for (int64_t p0 = start; p0 < longest && p0 < p_end; p0 += kAttentionValueSegment) {
    const int64_t p1 = p0 + kAttentionValueSegment < longest ? p0 + kAttentionValueSegment : longest;
    const int64_t all_end = len[0] < p0 ? p0 : len[0] < p1 ? len[0] : p1;  // every row takes [p0, all_end)
    V acc[HG][NV];
    for (int j = 0; j < HG; ++j)
      for (int c = 0; c < NV; ++c) acc[j][c] = S::zero();
    accumulate_values<S, D, HG, NV, kFull, true>(acc, values, scores, len, p0, all_end, longest, hd, i0);
    accumulate_values<S, D, HG, NV, kFull, false>(acc, values, scores, len, all_end, p1, longest, hd, i0);
    for (int j = 0; j < HG; ++j) {
      if (p0 >= len[j]) continue;
      for (int c = 0; c < NV; ++c) {
        float* out = rows.out(r0 + j) + i0 + c * W;
        const int64_t lanes = hd - i0 - c * W;
        store_n<S>(out, p0 == start ? acc[j][c] : S::add(load_n<S>(out, lanes), acc[j][c]), lanes);
      }
    }
  }
}

// attention_values for every column of the head.
template <class S, DType D, int HG, class Rows>
void attention_values_all(const Rows& values, const QueryRows& rows, int64_t r0, int64_t hd, int64_t p_begin,
                          int64_t p_end) {
  // HG x NV accumulators: up to 16 (AVX-512) or 8 (AVX2).
  constexpr int NV = S::kRegisters / 2 / HG > 4 ? 4 : S::kRegisters / 2 / HG;
  constexpr int64_t W = S::kWidth;
  int64_t i0 = 0;
  for (; i0 + NV * W <= hd; i0 += NV * W)
    attention_values<S, D, HG, NV, true>(values, rows, r0, hd, i0, p_begin, p_end);
  for (; i0 + W <= hd; i0 += W) attention_values<S, D, HG, 1, true>(values, rows, r0, hd, i0, p_begin, p_end);
  if (i0 < hd) attention_values<S, D, HG, 1, false>(values, rows, r0, hd, i0, p_begin, p_end);
}

// Each row's scores become its softmax probabilities. round_f16: the cache is f16 (its
// products with the probabilities are f16 x f16). With a softcap c each score s is first
// c * tanh(s / c); with a window the positions before the row's first get probability 0
// (their scores are not read), so the sums over the values need no other change; with sinks
// the row's head's sink joins the denominator (softmax_row).
template <class S>
void softmax_scores(const QueryRows& rows, bool round_f16) {
  const float cap = rows.a->softcap;
  const float* sinks = rows.a->sinks;
  for (int64_t r = 0; r < rows.count; ++r) {
    float* scores = rows.scores_of(r);
    const int64_t len = rows.len(r), first = rows.first(r);
    if (cap > 0.0f)
      for (int64_t p = first; p < len; ++p) scores[p] = std::tanh(scores[p] / cap) * cap;
    std::fill(scores, scores + first, 0.0f);
    const float sink = sinks != nullptr ? sinks[rows.h0 + r % rows.heads] : -__builtin_inff();
    softmax_row<S>(scores + first, len - first, scores + first, sink);
    if (!round_f16) continue;
    int64_t i = 0;
    for (; i + S::kWidth <= len; i += S::kWidth) S::store(scores + i, S::round_f16(S::load(scores + i)));
    if (i < len) store_n<S>(scores + i, S::round_f16(load_n<S>(scores + i, len - i)), len - i);
  }
}

// Every row's output from its probabilities (attention_values over positions [p_begin,
// p_end)), up to four rows per pass over the value rows.
template <class S, DType D, class Rows>
void attention_outputs(const QueryRows& rows, const Rows& values, int64_t p_begin = 0,
                       int64_t p_end = INT64_MAX) {
  const int64_t hd = rows.a->head_dim;
  int64_t r = 0;
  for (; r + 4 <= rows.count; r += 4) attention_values_all<S, D, 4>(values, rows, r, hd, p_begin, p_end);
  switch (rows.count - r) {
    case 3: attention_values_all<S, D, 3>(values, rows, r, hd, p_begin, p_end); break;
    case 2: attention_values_all<S, D, 2>(values, rows, r, hd, p_begin, p_end); break;
    case 1: attention_values_all<S, D, 1>(values, rows, r, hd, p_begin, p_end); break;
    default: break;
  }
}

// attention_scores for any head size.
template <class S, DType D, class Rows>
void attention_scores_of(const QueryRows& rows, const Rows& keys, int64_t p_begin, int64_t p_end) {
  const int64_t hd = rows.a->head_dim;
  if (hd % S::kWidth == 0) {
    attention_scores<S, D, true>(rows, keys, hd, rows.a->scale, p_begin, p_end);
  } else {
    attention_scores<S, D, false>(rows, keys, hd, rows.a->scale, p_begin, p_end);
  }
}

// Every row of `rows`, with the kv head's cache rows addressed by `keys` and `values`.
// round_f16: the cache is f16 (as softmax_scores).
template <class S, DType D, class Rows>
void attention_rows(const QueryRows& rows, const Rows& keys, const Rows& values, bool round_f16) {
  attention_scores_of<S, D>(rows, keys, 0, INT64_MAX);
  softmax_scores<S>(rows, round_f16);
  attention_outputs<S, D>(rows, values);
}

// ---- multi-token items: keys staged transposed

// kt[d * ld + p] = k_p[d] as f32 for p < longest, zero for p in [longest, ld) (ld a multiple
// of kWidth): kWidth x kWidth blocks transposed in registers.
template <class S, DType D, class Rows>
void stage_keys(const Rows& keys, int64_t longest, int64_t hd, int64_t ld, float* kt) {
  using V = typename S::V;
  constexpr int64_t W = S::kWidth;
  for (int64_t p0 = 0; p0 < ld; p0 += W) {
    for (int64_t d0 = 0; d0 < hd; d0 += W) {
      V block[W];
      for (int64_t j = 0; j < W; ++j)
        block[j] = p0 + j < longest ? load_w_n<S, D>(keys.row(p0 + j) + d0, hd - d0) : S::zero();
      S::transpose(block);  // block[i]: dimension d0 + i of positions p0..
      for (int64_t i = 0; i < W && d0 + i < hd; ++i) S::store(kt + (d0 + i) * ld + p0, block[i]);
    }
  }
}

// a[r] = the lane-`l` partial sum of attention_scores' vector sum for row r, for kWidth
// positions at once: sum over d = l, l + kWidth, ... < hd of q_r[d] k[d], fused in that
// order from zero. (attention_scores also adds 0 x 0 in the lanes of a partial last vector:
// that can only turn a zero score's -0 into +0, which no softmax output can tell apart.)
template <class S, int R>
[[gnu::always_inline]] inline void lane_partials(const float* const (&q)[R], const float* kt, int64_t ld,
                                                 int64_t hd, int64_t l, typename S::V (&a)[R]) {
  for (int r = 0; r < R; ++r) a[r] = S::zero();
  for (int64_t d = l; d < hd; d += S::kWidth) {
    const typename S::V k = S::load(kt + d * ld);
    for (int r = 0; r < R; ++r) a[r] = S::fma(S::set1(q[r][d]), k, a[r]);
  }
}

// Lane j's partial plus lane j + 8's: Avx512::reduce_add4 first folds its 16 lanes to 8 so.
template <class S, int R>
[[gnu::always_inline]] inline void folded_partials(const float* const (&q)[R], const float* kt, int64_t ld,
                                                   int64_t hd, int64_t j, typename S::V (&f)[R]) {
  static_assert(S::kWidth == 16, "the staged scores follow Avx512::reduce_add4");
  typename S::V high[R];
  lane_partials<S, R>(q, kt, ld, hd, j, f);
  lane_partials<S, R>(q, kt, ld, hd, j + 8, high);
  for (int r = 0; r < R; ++r) f[r] = S::add(f[r], high[r]);
}

// s[r] = scale * q_r . k_p for kWidth positions p at once (kt points at the first), summed
// exactly as attention_scores sums a whole four: the lane partials, then S::reduce_add4's
// tree over the 8 folded lanes, ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)). No shuffles:
// every lane is one position.
template <class S, int R, int64_t kHd>
[[gnu::always_inline]] inline void scores_across_positions(const float* const (&q)[R], const float* kt,
                                                           int64_t ld, int64_t head_dim, float scale,
                                                           typename S::V (&s)[R]) {
  using V = typename S::V;
  const int64_t hd = kHd > 0 ? kHd : head_dim;
  V f0[R], f1[R], g[R], h[R];
  folded_partials<S, R>(q, kt, ld, hd, 0, f0);
  folded_partials<S, R>(q, kt, ld, hd, 1, f1);
  for (int r = 0; r < R; ++r) g[r] = S::add(f0[r], f1[r]);
  folded_partials<S, R>(q, kt, ld, hd, 2, f0);
  folded_partials<S, R>(q, kt, ld, hd, 3, f1);
  for (int r = 0; r < R; ++r) h[r] = S::add(g[r], S::add(f0[r], f1[r]));
  folded_partials<S, R>(q, kt, ld, hd, 4, f0);
  folded_partials<S, R>(q, kt, ld, hd, 5, f1);
  for (int r = 0; r < R; ++r) g[r] = S::add(f0[r], f1[r]);
  folded_partials<S, R>(q, kt, ld, hd, 6, f0);
  folded_partials<S, R>(q, kt, ld, hd, 7, f1);
  const V scale_v = S::set1(scale);
  for (int r = 0; r < R; ++r) s[r] = S::mul(S::add(h[r], S::add(g[r], S::add(f0[r], f1[r]))), scale_v);
}

// attention_scores' results, bit for bit, from the staged keys kt: R rows by kWidth
// positions at a time over each row's whole fours (positions below len & ~3), in blocks of
// 64 positions that stay in L1 for all rows; the last len % 4 positions as attention_scores
// takes them, one at a time from the cache rows `keys`.
template <class S, DType D, int64_t kHd, class Rows>
void staged_scores(const QueryRows& rows, const float* kt, int64_t ld, const Rows& keys) {
  constexpr int R = 4;  // rows per pass: 4 x 5 live vectors of partial sums, of 32 registers
  constexpr int64_t W = S::kWidth;
  constexpr int64_t kBlock = 64;
  const int64_t hd = rows.a->head_dim;
  const float scale = rows.a->scale;
  const auto whole = [&](int64_t r) { return rows.len(r) & ~int64_t{3}; };
  for (int64_t p0 = 0; p0 < whole(rows.count - 1); p0 += kBlock) {
    for (int64_t r0 = 0; r0 < rows.count; r0 += R) {
      if (p0 + kBlock <= rows.first(r0)) continue;  // before every window of the pass's rows
      const float* q[R];  // a short last pass repeats its last row and stores it once
      for (int j = 0; j < R; ++j) q[j] = rows.q(r0 + j < rows.count ? r0 + j : rows.count - 1);
      const int64_t r1 = r0 + R < rows.count ? r0 + R : rows.count;
      const int64_t p1 = p0 + kBlock < whole(r1 - 1) ? p0 + kBlock : whole(r1 - 1);
      for (int64_t p = p0; p < p1; p += W) {
        typename S::V s[R];
        scores_across_positions<S, R, kHd>(q, kt + p, ld, hd, scale, s);
        for (int64_t r = r0; r < r1; ++r) store_n<S>(rows.scores_of(r) + p, s[r - r0], whole(r) - p);
      }
    }
  }
  const bool full = hd % W == 0;
  for (int64_t r = 0; r < rows.count; ++r)
    for (int64_t p = whole(r); p < rows.len(r); ++p)
      rows.scores_of(r)[p] = full ? score_alone<S, D, true>(rows.q(r), keys.row(p), hd, scale)
                                  : score_alone<S, D, false>(rows.q(r), keys.row(p), hd, scale);
}

// Every row of an item of several tokens: the keys are staged transposed (scores without
// horizontal sums), a 16-bit cache's values widened to f32 once. The same bits as
// attention_rows.
template <class S, DType D, class Rows>
void attention_staged(const QueryRows& rows, const Rows& keys, const Rows& values, float* scratch) {
  const int64_t hd = rows.a->head_dim, longest = rows.len(rows.count - 1);
  const int64_t ld = (longest + kAttentionStageAlign - 1) / kAttentionStageAlign * kAttentionStageAlign;
  stage_keys<S, D>(keys, longest, hd, ld, scratch);
  switch (hd) {  // the common head sizes unrolled
    case 64: staged_scores<S, D, 64>(rows, scratch, ld, keys); break;
    case 128: staged_scores<S, D, 128>(rows, scratch, ld, keys); break;
    default: staged_scores<S, D, 0>(rows, scratch, ld, keys); break;
  }
  softmax_scores<S>(rows, D == DType::F16);
  if constexpr (D == DType::F32) {
    attention_outputs<S, D>(rows, values);
  } else {
    float* v32 = scratch + hd * ld;
    for (int64_t p = rows.first_read(); p < longest; ++p)
      convert_typed<S, D>(values.row(p), hd, v32 + p * hd);
    attention_outputs<S, DType::F32>(rows, ContiguousRows<DType::F32>{v32, hd});
  }
}

// Every row of an item of several tokens, AVX2: a 16-bit cache's keys and values widened to
// f32 once, as rows (the staged scores need registers for four rows' partial sums: with
// AVX2's 16 they ran 8-12% slower than attention_scores). The same bits.
template <class S, DType D, class Rows>
void attention_widened(const QueryRows& rows, const Rows& keys, const Rows& values, float* scratch) {
  const int64_t hd = rows.a->head_dim, longest = rows.len(rows.count - 1);
  float* k32 = scratch;
  float* v32 = scratch + longest * hd;
  for (int64_t p = rows.first_read(); p < longest; ++p) {
    convert_typed<S, D>(keys.row(p), hd, k32 + p * hd);
    convert_typed<S, D>(values.row(p), hd, v32 + p * hd);
  }
  attention_rows<S, DType::F32>(rows, ContiguousRows<DType::F32>{k32, hd},
                                ContiguousRows<DType::F32>{v32, hd}, D == DType::F16);
}

template <class S, DType D, class Rows>
void attention_item(const QueryRows& rows, const Rows& keys, const Rows& values, float* scratch) {
  if (rows.count / rows.heads < kAttentionStageTokens) {
    attention_rows<S, D>(rows, keys, values, D == DType::F16);
  } else if constexpr (S::kRegisters >= 32) {
    attention_staged<S, D>(rows, keys, values, scratch);
  } else if constexpr (D != DType::F32) {
    attention_widened<S, D>(rows, keys, values, scratch);
  } else {
    attention_rows<S, D>(rows, keys, values, false);
  }
}

// Calls item(keys, values) with the cache rows of query head h0's kv head: ContiguousRows,
// or PagedRows when a's caches are block pools.
template <DType D, class Item>
void with_cache_rows(const AttentionArgs& a, int64_t h0, Item&& item) {
  const int64_t kv_head = h0 / (a.n_heads / a.n_kv_heads);
  const int64_t stride = a.n_kv_heads * a.head_dim;  // between cache rows
  const Storage<D>* keys = static_cast<const Storage<D>*>(a.k_cache) + kv_head * a.head_dim;
  const Storage<D>* values = static_cast<const Storage<D>*>(a.v_cache) + kv_head * a.head_dim;
  if (a.blocks == nullptr) {
    item(ContiguousRows<D>{keys, stride}, ContiguousRows<D>{values, stride});
  } else {
    const int64_t mask = (int64_t{1} << a.block_shift) - 1;
    item(PagedRows<D>{keys, stride, a.blocks, a.block_shift, mask},
         PagedRows<D>{values, stride, a.blocks, a.block_shift, mask});
  }
}

template <class S, DType D>
void attention_typed(const AttentionArgs& a, int64_t t0, int64_t t1, int64_t h0, int64_t h1, float* scratch) {
  const int64_t longest = a.first_pos + t1;
  const QueryRows rows{&a, t0, h0, h1 - h0, (t1 - t0) * (h1 - h0), longest, scratch};
  float* staged = scratch + rows.count * longest;
  with_cache_rows<D>(
      a, h0, [&](const auto& keys, const auto& values) { attention_item<S, D>(rows, keys, values, staged); });
}

// KernelTable::attention_block_tokens: 16 whatever the call.
int64_t attention_block_tokens(const AttentionArgs&) { return 16; }

// Calls fn(std::integral_constant<DType, D>) for the cache dtype D of a.
template <class Fn>
void with_cache_dtype(const AttentionArgs& a, Fn&& fn) {
  switch (a.cache_dtype) {
    case DType::F32: fn(std::integral_constant<DType, DType::F32>{}); break;
    case DType::BF16: fn(std::integral_constant<DType, DType::BF16>{}); break;
    case DType::F16: fn(std::integral_constant<DType, DType::F16>{}); break;
    default: break;  // the backend accepts only f32/bf16/f16 caches
  }
}

template <class S>
void attention(const AttentionArgs& a, int64_t t0, int64_t t1, int64_t h0, int64_t h1, float* scratch) {
  with_cache_dtype(a, [&](auto d) { attention_typed<S, d()>(a, t0, t1, h0, h1, scratch); });
}

// ---- one token in phases (KernelTable::token_attention)

// The rows of a's one token, heads [h0, h1), their scores at `scores` (attention_typed's
// layout for a call of that token) and their outputs at out + head * head_dim.
inline QueryRows token_rows(const AttentionArgs& a, int64_t h0, int64_t h1, float* scores) {
  return {&a, 0, h0, h1 - h0, h1 - h0, a.first_pos + 1, scores};
}

template <class S>
void token_attention(const AttentionArgs& token, TokenPhase phase, int64_t h0, int64_t h1, int64_t p0,
                     int64_t p1, float* scores, float* out) {
  AttentionArgs a = token;
  a.out = out;
  const QueryRows rows = token_rows(a, h0, h1, scores);
  with_cache_dtype(a, [&](auto d) {
    with_cache_rows<d()>(a, h0, [&](const auto& keys, const auto& values) {
      switch (phase) {
        case TokenPhase::Scores: attention_scores_of<S, d()>(rows, keys, p0, p1); break;
        case TokenPhase::Softmax: softmax_scores<S>(rows, d() == DType::F16); break;
        case TokenPhase::Values: attention_outputs<S, d()>(rows, values, p0, p1); break;
      }
    });
  });
}

}  // namespace
}  // namespace tokenmill::cpu
