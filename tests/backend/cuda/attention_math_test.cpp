// The per-element math of the CUDA attention kernels (attention_math.h), run on the CPU: the
// online softmax (interleaved partial states merged in order, as the kernels' warps do)
// against a two-pass float64 softmax, the f16-cache rounding rule, the grouped-query head
// mapping, and whole attention rows composed from these pieces against the float64
// reference with the conformance suite's tolerances.
#include "backend/cuda/attention_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/conformance_harness.h"
#include "backend/cuda/attention_kernels.h"
#include "backend/reference/reference_ops.h"

namespace tokenmill::cuda {
namespace {

using testing::close_to_reference;

constexpr double kF32 = 1e-5;
constexpr double kF16Probabilities = 1e-3;

std::vector<float> uniform(int64_t count, float lo, float hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> value(lo, hi);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = value(rng);
  return v;
}

// The state of `scores` split into `parts` interleaved walks (part w takes w, w + parts, ...),
// each in order, merged in part order.
SoftmaxState interleaved_state(const std::vector<float>& scores, int parts) {
  SoftmaxState all = softmax_empty();
  for (int w = 0; w < parts; ++w) {
    SoftmaxState state = softmax_empty();
    for (size_t p = static_cast<size_t>(w); p < scores.size(); p += static_cast<size_t>(parts))
      state = softmax_add(state, scores[p]);
    all = softmax_merge(all, state);
  }
  return all;
}

TEST(AttentionMath, OnlineSoftmaxMatchesTwoPassFloat64) {
  uint64_t seed = 1;
  // Ranges up to +-1e4: exp of an unshifted score would overflow; most terms underflow to 0.
  for (const float range : {1.0f, 30.0f, 100.0f, 1e4f}) {
    for (const int64_t len : {1, 2, 3, 5, 31, 257, 1000}) {
      const std::vector<float> scores = uniform(len, -range, range, seed++);
      const double max = *std::max_element(scores.begin(), scores.end());
      double sum = 0;
      for (const float s : scores) sum += std::exp(s - max);
      std::vector<double> want;
      for (const float s : scores) want.push_back(std::exp(s - max) / sum);
      for (const int parts : {1, 4, 7}) {
        SCOPED_TRACE("range " + std::to_string(range) + " len " + std::to_string(len) + " parts " +
                     std::to_string(parts));
        const SoftmaxState state = interleaved_state(scores, parts);
        EXPECT_EQ(state.max, max);
        EXPECT_NEAR(state.sum, sum, kF32 * sum);
        std::vector<float> got;
        for (const float s : scores) got.push_back(softmax_probability(s, state));
        EXPECT_TRUE(close_to_reference(got, want, kF32));
      }
    }
  }
}

TEST(AttentionMath, EmptyStatesMergeWithoutNaN) {
  const SoftmaxState empty = softmax_empty();
  const SoftmaxState both = softmax_merge(empty, empty);
  EXPECT_EQ(both.max, -INFINITY);
  EXPECT_EQ(both.sum, 0.0f);
  const SoftmaxState one = softmax_add(empty, -3.5f);
  EXPECT_EQ(one.max, -3.5f);
  EXPECT_EQ(one.sum, 1.0f);
  const SoftmaxState x{2.0f, 3.25f};
  for (const SoftmaxState& m : {softmax_merge(empty, x), softmax_merge(x, empty)}) {
    EXPECT_EQ(m.max, x.max);
    EXPECT_EQ(m.sum, x.sum);
  }
  // Fewer scores than walks: the empty walks change nothing.
  const SoftmaxState few = interleaved_state({0.5f, -0.25f}, 4);
  EXPECT_EQ(few.max, 0.5f);
  EXPECT_FLOAT_EQ(few.sum, 1.0f + std::exp(-0.75f));
}

TEST(AttentionMath, F16CacheRoundsToNearestEven) {
  EXPECT_EQ(round_to_f16(1.0f + 0x1p-11f), 1.0f);                        // tie: down to even
  EXPECT_EQ(round_to_f16(1.0f + 3 * 0x1p-11f), 1.0f + 0x1p-9f);          // tie: up to even
  EXPECT_EQ(round_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 1.0f + 0x1p-10f);  // above the tie
  EXPECT_EQ(round_to_f16(-0.1f), -0.0999755859375f);
  EXPECT_EQ(round_to_f16(65504.0f), 65504.0f);  // largest f16
  EXPECT_EQ(round_to_f16(65519.0f), 65504.0f);
  EXPECT_EQ(round_to_f16(65520.0f), INFINITY);  // the tie above it overflows
  EXPECT_EQ(round_to_f16(0x1p-25f), 0.0f);      // half the smallest subnormal: tie to 0
  EXPECT_EQ(round_to_f16(3 * 0x1p-26f), 0x1p-24f);
  EXPECT_EQ(round_to_f16(-5 * 0x1p-25f), -2 * 0x1p-24f);  // -2.5 subnormal steps: tie to even
  // Only an f16 cache rounds.
  EXPECT_EQ(cache_operand(1.0f + 0x1p-11f, true), 1.0f);
  for (const float x : {1.0f + 0x1p-11f, 0.1f, -7e4f, 1e-30f}) EXPECT_EQ(cache_operand(x, false), x);
}

TEST(AttentionMath, ConsecutiveQueryHeadsShareAKvHead) {
  const int64_t eight_over_two[] = {0, 0, 0, 0, 1, 1, 1, 1};
  for (int64_t h = 0; h < 8; ++h) EXPECT_EQ(kv_head_of(h, 8, 2), eight_over_two[h]);
  for (int64_t h = 0; h < 6; ++h) EXPECT_EQ(kv_head_of(h, 6, 6), h);
  for (int64_t h = 0; h < 5; ++h) EXPECT_EQ(kv_head_of(h, 5, 1), 0);
  for (int64_t h = 0; h < 6; ++h) EXPECT_EQ(kv_head_of(h, 6, 2), h / 3);
}

// Attention composed from attention_math.h as the row-wise kernels do it: q and the
// probabilities through cache_operand; a row of one split (attention_splits.h) takes its
// softmax state from kAttentionWarps interleaved walks merged in order and sums its values
// the same way; a row of several splits merges the splits' states (each from interleaved
// walks over the split) in split order and adds the splits' value sums in split order.
// k, v hold the cache's values.
std::vector<float> attention_from_math(const std::vector<float>& q, const std::vector<float>& k,
                                       const std::vector<float>& v, int64_t n, int64_t heads,
                                       int64_t kv_heads, int64_t hd, int64_t first_pos, float scale,
                                       bool f16) {
  std::vector<float> out(static_cast<size_t>(n * heads * hd), 0.0f);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kv = kv_head_of(h, heads, kv_heads);
      const auto score = [&](int64_t p) {
        float dot = 0.0f;
        for (int64_t i = 0; i < hd; ++i)
          dot = std::fma(cache_operand(q[static_cast<size_t>((t * heads + h) * hd + i)], f16),
                         k[static_cast<size_t>((p * kv_heads + kv) * hd + i)], dot);
        return dot * scale;
      };
      const int64_t positions = first_pos + t + 1, splits = attention_splits(positions);
      SoftmaxState all = softmax_empty();
      for (int64_t s = 0; s < splits; ++s) {
        const PositionRange r = split_range(positions, s);
        std::vector<float> scores;
        for (int64_t p = r.begin; p < r.end; ++p) scores.push_back(score(p));
        all = softmax_merge(all, interleaved_state(scores, kAttentionWarps));
      }
      float* o = out.data() + (t * heads + h) * hd;
      for (int64_t s = 0; s < splits; ++s) {
        const PositionRange r = split_range(positions, s);
        // The split's sum: warp w's positions r.begin + w, + kAttentionWarps, ..., then the warps in order.
        std::vector<float> split_sum(static_cast<size_t>(hd), 0.0f);
        for (int w = 0; w < kAttentionWarps; ++w) {
          std::vector<float> acc(static_cast<size_t>(hd), 0.0f);
          for (int64_t p = r.begin + w; p < r.end; p += kAttentionWarps) {
            const float prob = cache_operand(softmax_probability(score(p), all), f16);
            for (int64_t i = 0; i < hd; ++i)
              acc[static_cast<size_t>(i)] = std::fma(
                  prob, v[static_cast<size_t>((p * kv_heads + kv) * hd + i)], acc[static_cast<size_t>(i)]);
          }
          for (int64_t i = 0; i < hd; ++i) split_sum[static_cast<size_t>(i)] += acc[static_cast<size_t>(i)];
        }
        for (int64_t i = 0; i < hd; ++i) o[i] += split_sum[static_cast<size_t>(i)];
      }
    }
  }
  return out;
}

TEST(AttentionMath, ComposedRowsMatchReferenceWithTheF16Rule) {
  struct Case {
    int64_t hd, heads, kv_heads, n, first_pos;
  };
  uint64_t seed = 100;
  for (const bool f16 : {false, true}) {
    for (const Case& c : {Case{16, 4, 1, 1, 0}, Case{20, 6, 2, 5, 37}, Case{64, 8, 2, 3, 200},
                          Case{80, 4, 4, 9, 3}, Case{32, 4, 2, 3, 1022}, Case{16, 2, 1, 1, 20000}}) {
      SCOPED_TRACE(std::string(f16 ? "f16" : "f32") + " hd " + std::to_string(c.hd) + " n " +
                   std::to_string(c.n));
      const int64_t len = c.first_pos + c.n;
      std::vector<float> q = uniform(c.n * c.heads * c.hd, -2.0f, 2.0f, seed++);
      std::vector<float> k = uniform(len * c.kv_heads * c.hd, -1.0f, 1.0f, seed++);
      std::vector<float> v = uniform(len * c.kv_heads * c.hd, -1.0f, 1.0f, seed++);
      // The cache as the reference reads it: f32, or f16 (k, v then hold the f16 values).
      std::vector<uint16_t> k16, v16;
      if (f16) {
        for (auto [values, bits] : {std::pair{&k, &k16}, std::pair{&v, &v16}}) {
          for (float& x : *values) {
            bits->push_back(f32_to_f16(x));
            x = f16_to_f32(bits->back());
          }
        }
      }
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
      const Tensor tq(q.data(), DType::F32, {c.n, c.heads, c.hd});
      const Tensor tk = f16 ? Tensor(k16.data(), DType::F16, {len, c.kv_heads, c.hd})
                            : Tensor(k.data(), DType::F32, {len, c.kv_heads, c.hd});
      const Tensor tv = f16 ? Tensor(v16.data(), DType::F16, {len, c.kv_heads, c.hd})
                            : Tensor(v.data(), DType::F32, {len, c.kv_heads, c.hd});
      EXPECT_TRUE(close_to_reference(
          attention_from_math(q, k, v, c.n, c.heads, c.kv_heads, c.hd, c.first_pos, scale, f16),
          reference::attention(tq, tk, tv, c.first_pos, scale), f16 ? kF16Probabilities : kF32));
    }
  }
}

// The splits of a row cover its positions in order, each non-empty, at most kMaxSplits of
// about kSplitPositions positions; rows of up to kSplitPositions positions are one split.
TEST(AttentionSplits, CoverEveryPositionOnceInOrder) {
  for (int64_t positions = 1; positions <= 40000; positions += positions < 2100 ? 1 : 97) {
    const int64_t splits = attention_splits(positions);
    ASSERT_EQ(splits, positions <= kSplitPositions
                          ? 1
                          : std::min(kMaxSplits, (positions + kSplitPositions - 1) / kSplitPositions))
        << positions;
    int64_t next = 0;
    for (int64_t s = 0; s < splits; ++s) {
      const PositionRange r = split_range(positions, s);
      ASSERT_EQ(r.begin, next) << positions << " split " << s;
      ASSERT_GT(r.end, r.begin) << positions << " split " << s;
      ASSERT_LE(r.end - r.begin, std::max(kSplitPositions, (positions + kMaxSplits - 1) / kMaxSplits));
      next = r.end;
    }
    ASSERT_EQ(next, positions);
  }
}

TEST(AttentionSplits, PlanKeepsTheScratchWithinItsBudget) {
  const size_t state = sizeof(SoftmaxState);
  // No row longer than a split: no split pass, no scratch.
  const SplitPlan none = split_plan(100, 32, 128, 1, kSplitPositions, state);
  EXPECT_EQ(none.max_splits, 1);
  EXPECT_FALSE(none.every_row_splits);
  EXPECT_EQ(none.scratch_bytes, 0u);
  // A decode batch of 3 rows over 600-4096 positions: 8 splits, all rows in one chunk, and
  // no row for the one-split kernel.
  const SplitPlan decode = split_plan(3, 32, 128, 600, 4096, state);
  EXPECT_EQ(decode.max_splits, 8);
  EXPECT_TRUE(decode.every_row_splits);
  EXPECT_EQ(decode.rows_per_chunk, 3);
  EXPECT_EQ(decode.scratch_bytes, 3u * 32 * 8 * (state + 128 * sizeof(float)));
  // A long prefill forced row-wise: chunks of rows within the budget, its first rows short.
  const SplitPlan prefill = split_plan(20000, 32, 256, 1, 20000, state);
  EXPECT_EQ(prefill.max_splits, kMaxSplits);
  EXPECT_FALSE(prefill.every_row_splits);
  const size_t per_row = 32u * kMaxSplits * (state + 256 * sizeof(float));
  EXPECT_EQ(prefill.rows_per_chunk, static_cast<int64_t>(kSplitScratchBytes / per_row));
  EXPECT_LE(prefill.scratch_bytes, kSplitScratchBytes);
  // A row too wide for the budget still runs, one row at a time.
  EXPECT_EQ(split_plan(5, 1 << 12, 256, 40000, 40000, state).rows_per_chunk, 1);
}

}  // namespace
}  // namespace tokenmill::cuda
