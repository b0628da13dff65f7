// The training ops' per-element math and launch geometry (training_math.h,
// training_kernels.h), run on the CPU:
// 1. adamw_scalars + adamw_update give the CPU backend's adamw_step bit for bit (the CUDA
//    kernel runs the same function with the same roundings: every f32 operation is either a
//    written FMA or rounded as written; this file is compiled with -ffp-contract=off so the
//    host path is too).
// 2. The log-sum-exp partials: folded over random chunks and merged in order, or in the
//    kernel's order (strided threads, then a tree), they give float64's logsumexp; the merge
//    is commutative to the bit and handles empty parts and -inf.
// 3. The cross-entropy loss and gradient elements, in the kernel's order, match the float64
//    reference within the suite's f32 tolerance, for vocabularies up to 256K + 3.
// 4. The chunked reductions' geometry covers every element once, on odd sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/conformance_harness.h"
#include "backend/cuda/training_kernels.h"
#include "backend/cuda/training_math.h"
#include "backend/reference/reference_backward.h"
#include "core/tensor.h"

namespace tokenmill::cuda {
namespace {

constexpr double kF32 = 1e-5;  // the conformance suite's f32 tolerance

// Random f32 values with magnitudes spread over [2^lo_exp, 2^hi_exp), random signs.
std::vector<float> spread_values(std::mt19937_64& rng, size_t count, int lo_exp, int hi_exp,
                                 bool signed_values) {
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(lo_exp, hi_exp - 1);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> values(count);
  for (float& v : values) {
    v = std::ldexp(mantissa(rng), exponent(rng));
    if (signed_values && negative(rng)) v = -v;
  }
  return values;
}

// ---------------------------------------------------------------- 1. AdamW

TEST(TrainingMath, AdamWUpdateIsTheCpuBackendsBitForBit) {
  const std::vector<Backend::AdamW> hypers = {
      {},
      {.lr = 0.05f, .weight_decay = 0.1f, .step = 3, .grad_scale = 0.5f},
      {.lr = 3e-4f, .beta2 = 0.95f, .weight_decay = 0.1f, .step = 1000, .grad_scale = 0.7f / 1024},
      {.lr = 1e-2f, .beta1 = 0.8f, .eps = 1e-6f, .step = 123457},
      {.lr = 0.125f, .beta1 = 0.875f, .beta2 = 1.0f - 1.0f / 1024, .weight_decay = 0.5f, .step = 2},
  };
  const std::unique_ptr<Backend> cpu = make_cpu_backend();
  std::mt19937_64 rng(5);
  const size_t count = 20011;
  for (const Backend::AdamW& hyper : hypers) {
    SCOPED_TRACE("lr=" + std::to_string(hyper.lr) + " step=" + std::to_string(hyper.step));
    const std::vector<float> param0 = spread_values(rng, count, -12, 2, true);
    const std::vector<float> grad = spread_values(rng, count, -20, 4, true);
    const std::vector<float> m0 = spread_values(rng, count, -20, 0, true);
    const std::vector<float> v0 = spread_values(rng, count, -30, 0, false);
    std::vector<float> param = param0, m = m0, v = v0;
    const auto n = static_cast<int64_t>(count);
    cpu->adamw_step(Tensor(param.data(), DType::F32, {n}),
                    Tensor(const_cast<float*>(grad.data()), DType::F32, {n}),
                    Tensor(m.data(), DType::F32, {n}), Tensor(v.data(), DType::F32, {n}), hyper);

    const AdamWScalars s = adamw_scalars(hyper.lr, hyper.beta1, hyper.beta2, hyper.eps, hyper.weight_decay,
                                         hyper.step, hyper.grad_scale);
    size_t mismatches = 0;
    for (size_t i = 0; i < count; ++i) {
      const AdamWElement e = adamw_update(s, param0[i], grad[i], m0[i], v0[i]);
      const bool same = std::bit_cast<uint32_t>(e.param) == std::bit_cast<uint32_t>(param[i]) &&
                        std::bit_cast<uint32_t>(e.m) == std::bit_cast<uint32_t>(m[i]) &&
                        std::bit_cast<uint32_t>(e.v) == std::bit_cast<uint32_t>(v[i]);
      if (!same && mismatches++ == 0)
        ADD_FAILURE() << "element " << i << ": param " << e.param << " vs " << param[i] << ", m " << e.m
                      << " vs " << m[i] << ", v " << e.v << " vs " << v[i];
    }
    EXPECT_EQ(mismatches, 0u);
  }
}

// ---------------------------------------------------------------- 2. log-sum-exp partials

double logsumexp(const std::vector<float>& x, size_t begin, size_t end) {
  double top = -std::numeric_limits<double>::infinity();
  for (size_t i = begin; i < end; ++i) top = std::max(top, static_cast<double>(x[i]));
  double sum = 0;
  for (size_t i = begin; i < end; ++i) sum += std::exp(static_cast<double>(x[i]) - top);
  return top + std::log(sum);
}

double lse_of(LsePartial p) { return static_cast<double>(p.max) + std::log(p.sum); }

LsePartial fold(const std::vector<float>& x, size_t begin, size_t end) {
  LsePartial p = lse_empty();
  for (size_t i = begin; i < end; ++i) p = lse_add(p, x[i]);
  return p;
}

// The kernel's order (training_kernels.cu): thread t folds elements t, t + threads, ...; the
// partials then merge in a tree, stride threads / 2 down to 1.
LsePartial fold_as_kernel(const float* x, int64_t count) {
  std::vector<LsePartial> partial(kCrossEntropyThreads, lse_empty());
  for (int64_t t = 0; t < kCrossEntropyThreads; ++t)
    for (int64_t j = t; j < count; j += kCrossEntropyThreads)
      partial[static_cast<size_t>(t)] = lse_add(partial[static_cast<size_t>(t)], x[j]);
  for (size_t stride = kCrossEntropyThreads / 2; stride > 0; stride /= 2)
    for (size_t t = 0; t < stride; ++t) partial[t] = lse_merge(partial[t], partial[t + stride]);
  return partial[0];
}

TEST(TrainingMath, LseOverRandomChunksMatchesFloat64) {
  std::mt19937_64 rng(11);
  for (const size_t count : {1, 2, 7, 1000, 100003}) {
    for (const float range : {4.0f, 100.0f}) {
      SCOPED_TRACE("count=" + std::to_string(count) + " range=" + std::to_string(range));
      std::uniform_real_distribution<float> value(-range, range);
      std::vector<float> x(count);
      for (float& v : x) v = value(rng);
      const double want = logsumexp(x, 0, count);
      const double tolerance = 1e-6 * std::max(1.0, std::abs(want));

      // Random chunk boundaries, each chunk folded, the chunks merged left to right.
      std::uniform_int_distribution<size_t> chunk(1, std::max<size_t>(1, count / 5));
      LsePartial merged = lse_empty();
      for (size_t begin = 0; begin < count;) {
        const size_t end = std::min(count, begin + chunk(rng));
        const LsePartial part = fold(x, begin, end);
        EXPECT_NEAR(lse_of(part), logsumexp(x, begin, end), 1e-6 * std::max(1.0, std::abs(lse_of(part))));
        merged = lse_merge(merged, part);
        begin = end;
      }
      EXPECT_NEAR(lse_of(merged), want, tolerance);
      EXPECT_NEAR(lse_of(fold_as_kernel(x.data(), static_cast<int64_t>(count))), want, tolerance);

      // Increasing values: every element is a new max, every step a rescale.
      std::vector<float> rising = x;
      std::sort(rising.begin(), rising.end());
      EXPECT_NEAR(lse_of(fold(rising, 0, count)), want, tolerance);
    }
  }
}

TEST(TrainingMath, LseMergeIsCommutativeAndHandlesEmptyAndMinusInfinity) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> value(-30.0f, 30.0f);
  for (int trial = 0; trial < 1000; ++trial) {
    const LsePartial a{value(rng), 1.0 + trial}, b{trial % 7 == 0 ? a.max : value(rng), 0.5 * trial + 1.0};
    const LsePartial ab = lse_merge(a, b), ba = lse_merge(b, a);
    EXPECT_EQ(std::bit_cast<uint32_t>(ab.max), std::bit_cast<uint32_t>(ba.max));
    EXPECT_EQ(std::bit_cast<uint64_t>(ab.sum), std::bit_cast<uint64_t>(ba.sum));
  }
  const LsePartial p{2.5f, 3.0};
  for (const LsePartial& q : {lse_merge(lse_empty(), p), lse_merge(p, lse_empty())}) {
    EXPECT_EQ(q.max, p.max);
    EXPECT_EQ(q.sum, p.sum);
  }
  const LsePartial empty = lse_merge(lse_empty(), lse_empty());
  EXPECT_EQ(empty.max, -INFINITY);
  EXPECT_EQ(empty.sum, 0.0);

  // -inf elements add nothing, before or after the finite ones.
  const std::vector<float> x = {-INFINITY, 1.0f, -INFINITY, 3.0f, -INFINITY};
  const LsePartial folded = fold(x, 0, x.size());
  EXPECT_NEAR(lse_of(folded), std::log(std::exp(1.0) + std::exp(3.0)), 1e-7);
  const LsePartial only_minus_inf = fold(x, 0, 1);
  EXPECT_EQ(only_minus_inf.sum, 0.0);
  EXPECT_EQ(lse_of(lse_merge(only_minus_inf, fold(x, 1, 2))), 1.0);
}

// ---------------------------------------------------------------- 3. cross-entropy elements

TEST(TrainingMath, CrossEntropyInTheKernelsOrderMatchesReference) {
  std::mt19937_64 rng(7);
  for (const int64_t vocab : {1, 13, 517, 4099, 262147}) {
    for (const float hi : {4.0f, 100.0f}) {
      SCOPED_TRACE("vocab=" + std::to_string(vocab) + " |logits| <= " + std::to_string(hi));
      const int64_t n = vocab > 100000 ? 3 : 7;
      std::vector<int32_t> targets = {0, static_cast<int32_t>(vocab - 1), -1,
                                      static_cast<int32_t>(vocab / 2)};
      for (int64_t t = 4; t < n; ++t) targets.push_back(t % 2 == 0 ? -7 : static_cast<int32_t>(vocab / 3));
      targets.resize(static_cast<size_t>(n));
      const std::vector<float> logits = spread_values(rng, static_cast<size_t>(n * vocab), -4, 0, true);
      std::vector<float> scaled(logits.size());
      std::transform(logits.begin(), logits.end(), scaled.begin(), [hi](float v) { return v * hi; });
      const float grad_scale = 0.37f;
      const reference::CrossEntropy want =
          reference::cross_entropy(Tensor(scaled.data(), DType::F32, {n, vocab}), targets, grad_scale);

      std::vector<float> losses(static_cast<size_t>(n)), dlogits(scaled.size(), 0.0f);
      for (int64_t r = 0; r < n; ++r) {
        const float* x = scaled.data() + r * vocab;
        float* dx = dlogits.data() + r * vocab;
        const int32_t target = targets[static_cast<size_t>(r)];
        if (target < 0) continue;  // loss 0, zero gradient
        const LsePartial row = fold_as_kernel(x, vocab);
        losses[static_cast<size_t>(r)] = cross_entropy_loss(row, x[target]);
        const float scale = cross_entropy_scale(row, grad_scale);
        for (int64_t j = 0; j < vocab; ++j)
          dx[j] = cross_entropy_grad(x[j], row.max, scale, grad_scale, j == target);
      }
      EXPECT_TRUE(testing::close_to_reference(losses, want.losses, kF32)) << "losses";
      EXPECT_TRUE(testing::close_to_reference(dlogits, want.dlogits, kF32)) << "dlogits";
    }
  }
}

// ---------------------------------------------------------------- 4. geometry

TEST(TrainingGeometry, SumChunksCoverEveryElementOnce) {
  for (const int64_t count : {int64_t{0}, int64_t{1}, int64_t{255}, kMinSumChunk - 1, kMinSumChunk,
                              kMinSumChunk + 1, int64_t{100003}, kMinSumChunk * kMaxSumBlocks + 1,
                              int64_t{12345677}, (int64_t{1} << 31) + 7, (int64_t{1} << 40) + 3}) {
    SCOPED_TRACE("count=" + std::to_string(count));
    const SumGeometry g = sum_geometry(count);
    EXPECT_EQ(g.chunk % kSumThreads, 0);
    EXPECT_GE(g.chunk, kMinSumChunk);
    EXPECT_LE(g.blocks, kMaxSumBlocks);
    if (count == 0) {
      EXPECT_EQ(g.blocks, 0);
      continue;
    }
    // Block b covers [b * chunk, min((b + 1) * chunk, count)): none empty, the last one ends at count.
    EXPECT_GE(g.blocks * g.chunk, count);
    EXPECT_LT((g.blocks - 1) * g.chunk, count);
  }
}

TEST(TrainingGeometry, CrossEntropyBlocksStrideOverAnyRowCount) {
  EXPECT_EQ(cross_entropy_blocks(0), 0);
  EXPECT_EQ(cross_entropy_blocks(1), 1);
  EXPECT_EQ(cross_entropy_blocks(4097), 4097);
  EXPECT_EQ(cross_entropy_blocks(kMaxCrossEntropyBlocks + 1), kMaxCrossEntropyBlocks);
  // A power of two, so the kernel's merge tree pairs every thread.
  EXPECT_TRUE(std::has_single_bit(static_cast<unsigned>(kCrossEntropyThreads)));
}

}  // namespace
}  // namespace tokenmill::cuda
