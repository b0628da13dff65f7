// Sampler: greedy, seeded reproducibility, and that each filter removes exactly the
// tokens its definition says (checked by sampling many times).
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "runtime/sampler.h"

namespace tokenmill {
namespace {

std::vector<float> logits_of(std::vector<float> v) { return v; }

// Tokens drawn over `draws` samples.
std::set<int32_t> support(const SamplingParams& params, const std::vector<float>& logits, int draws = 2000) {
  Sampler sampler(params);
  std::set<int32_t> seen;
  for (int i = 0; i < draws; ++i) {
    auto copy = logits;
    seen.insert(sampler.sample(copy, {}));
  }
  return seen;
}

TEST(Sampler, GreedyTakesArgmaxAndLowestIdOnTies) {
  Sampler s(SamplingParams{});
  auto l = logits_of({0.1f, 3.0f, -1.0f, 3.0f});
  EXPECT_EQ(s.sample(l, {}), 1);
}

TEST(Sampler, RepetitionPenaltyAppliesOncePerDistinctToken) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  Sampler s(p);
  auto l = logits_of({4.0f, 3.0f, -1.0f});
  const std::vector<int32_t> history = {0, 0, 0, 2};
  EXPECT_EQ(s.sample(l, history), 1);  // 4/2 = 2 < 3
  EXPECT_FLOAT_EQ(l[0], 2.0f);         // not 4/8
  EXPECT_FLOAT_EQ(l[2], -2.0f);        // negative logits are multiplied
}

TEST(Sampler, SameSeedSameTokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 1234;
  const std::vector<float> logits = {0.5f, 0.4f, 0.3f, 0.2f, 0.1f, 0.0f};
  std::vector<int32_t> a, b;
  Sampler s1(p), s2(p);
  for (int i = 0; i < 50; ++i) {
    auto l1 = logits, l2 = logits;
    a.push_back(s1.sample(l1, {}));
    b.push_back(s2.sample(l2, {}));
  }
  EXPECT_EQ(a, b);
  EXPECT_GT(std::set<int32_t>(a.begin(), a.end()).size(), 2u);  // it does sample
}

TEST(Sampler, TopKKeepsKTokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 2;
  EXPECT_EQ(support(p, {1.0f, 1.1f, 0.9f, 1.2f}), (std::set<int32_t>{1, 3}));
}

TEST(Sampler, TopPKeepsSmallestSetReachingP) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.6f;
  // probabilities ~ 0.5, 0.3, 0.2 (log space): {0, 1} reaches 0.8 >= 0.6, {0} alone does not.
  EXPECT_EQ(support(p, {std::log(0.5f), std::log(0.3f), std::log(0.2f)}), (std::set<int32_t>{0, 1}));
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.5f;
  // 0.45 and 0.35 are >= 0.5 * 0.45; 0.2 is not.
  EXPECT_EQ(support(p, {std::log(0.45f), std::log(0.35f), std::log(0.2f)}), (std::set<int32_t>{0, 1}));
}

TEST(Sampler, LowTemperatureConcentratesOnTheTop) {
  SamplingParams p;
  p.temperature = 0.01f;
  EXPECT_EQ(support(p, {1.0f, 1.5f, 0.2f}), (std::set<int32_t>{1}));
}

TEST(Sampler, RejectsInvalidParameters) {
  SamplingParams p;
  p.temperature = -1.0f;
  EXPECT_THROW(Sampler{p}, Error);
  p = {};
  p.top_p = 0.0f;
  EXPECT_THROW(Sampler{p}, Error);
  p = {};
  p.repetition_penalty = 0.0f;
  EXPECT_THROW(Sampler{p}, Error);
}

}  // namespace
}  // namespace tokenmill
