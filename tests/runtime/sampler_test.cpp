// Sampler: greedy, the penalties on exact logits, seeded reproducibility, that each filter
// removes exactly the tokens its definition says (checked by sampling many times), the
// same draws as a plain full-sort reference on large rows, and parameter validation.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "runtime/sampler.h"

namespace tokenmill {
namespace {

using ::testing::HasSubstr;

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

TEST(Sampler, NeverChoosesAnIdAtOrAboveTheVocabLimit) {
  // The ids beyond the limit have by far the highest logits: greedy and sampling still
  // choose below it.
  std::vector<float> logits = {0.1f, 0.3f, 0.2f, 0.0f, 9.0f, 8.0f};
  Sampler greedy(SamplingParams{.vocab_limit = 4});
  std::vector<float> row = logits;
  EXPECT_EQ(greedy.sample(row, {}), 1);
  Sampler sampler(SamplingParams{.temperature = 5.0f, .seed = 3, .vocab_limit = 4});
  for (int i = 0; i < 200; ++i) {
    row = logits;
    EXPECT_LT(sampler.sample(row, {}), 4);
  }
  EXPECT_THROW(Sampler(SamplingParams{.vocab_limit = -1}), Error);
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

TEST(Sampler, FrequencyAndPresencePenaltiesCountGeneratedTokensOnly) {
  SamplingParams p;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  Sampler s(p);
  auto l = logits_of({1.0f, 2.0f, 3.0f, -1.0f, 0.5f});
  // Prompt {3, 4, 4}; generated {2, 0, 2, 2, 7}: 7 is outside the row and ignored.
  const std::vector<int32_t> history = {3, 4, 4, 2, 0, 2, 2, 7};
  EXPECT_EQ(s.sample(l, history, 3), 1);
  EXPECT_EQ(l, logits_of({1.0f - 0.5f - 0.25f, 2.0f, 3.0f - 3 * 0.5f - 0.25f, -1.0f, 0.5f}));
  // The counts do not carry over to the next call.
  auto again = logits_of({1.0f, 2.0f, 3.0f, -1.0f, 0.5f});
  s.sample(again, std::span(history).first(4), 3);
  EXPECT_EQ(again, logits_of({1.0f, 2.0f, 3.0f - 0.5f - 0.25f, -1.0f, 0.5f}));
}

TEST(Sampler, NegativePenaltiesEncourageRepeats) {
  SamplingParams p;
  p.frequency_penalty = -1.0f;
  p.presence_penalty = -2.0f;
  Sampler s(p);
  auto l = logits_of({4.5f, 1.0f});
  const std::vector<int32_t> history = {1, 1};
  EXPECT_EQ(s.sample(l, history), 1);
  EXPECT_EQ(l, logits_of({4.5f, 1.0f + 2 * 1.0f + 2.0f}));
}

TEST(Sampler, RepetitionPenaltyComesBeforeFrequencyPenalty) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 1.0f;
  Sampler s(p);
  auto l = logits_of({4.0f, 0.0f});
  const std::vector<int32_t> history = {0};
  s.sample(l, history);
  EXPECT_EQ(l[0], 4.0f / 2.0f - 1.0f);  // (4 - 1) / 2 if the order were reversed
}

TEST(Sampler, RejectsAnEmptyRowAndAPromptLongerThanTheHistory) {
  Sampler s(SamplingParams{});
  auto l = logits_of({1.0f, 2.0f});
  const std::vector<int32_t> history = {0};
  EXPECT_THROW(s.sample(l, history, 2), Error);
  EXPECT_THROW(s.sample({}, history), Error);
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

// The definition in sampler.h done the plain way: sort the whole row (ties: lower id),
// truncate, then walk the renormalised weights with the same 53-bit uniform draw.
int32_t reference_draw(const std::vector<float>& logits, const SamplingParams& p, std::mt19937_64& rng) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
  });
  if (p.top_k > 0) order.resize(std::min(order.size(), static_cast<size_t>(p.top_k)));
  std::vector<double> weight;
  for (int32_t id : order)
    weight.push_back(std::exp(
        static_cast<double>(logits[static_cast<size_t>(id)] - logits[static_cast<size_t>(order[0])]) /
        p.temperature));
  const double total = std::accumulate(weight.begin(), weight.end(), 0.0);
  size_t cut = weight.size();
  double cumulative = 0.0;
  for (size_t i = 0; i < weight.size(); ++i) {
    if (weight[i] / total < p.min_p * (weight[0] / total)) {
      cut = i;
      break;
    }
    cumulative += weight[i];
    if (cumulative / total >= p.top_p) {
      cut = i + 1;
      break;
    }
  }
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 *
                   std::accumulate(weight.begin(), weight.begin() + static_cast<std::ptrdiff_t>(cut), 0.0);
  double running = 0.0;
  for (size_t i = 0; i < cut; ++i) {
    running += weight[i];
    if (u < running) return order[i];
  }
  return order[cut - 1];
}

// The sampler sorts only as much of the row as it needs, in chunks: it must still draw
// exactly what a full sort would, on large rows with ties, for every kind of truncation.
TEST(Sampler, DrawsWhatAFullSortWouldOnLargeRows) {
  std::mt19937 rng(11);
  int draws = 0;
  for (size_t vocab : {7u, 300u, 5000u, 40000u}) {
    for (float spread : {0.5f, 3.0f}) {
      for (auto [temperature, top_k, top_p, min_p] : std::vector<std::tuple<float, int32_t, float, float>>{
               {1.0f, 0, 1.0f, 0.0f},
               {0.7f, 0, 0.9f, 0.0f},
               {1.0f, 0, 1.0f, 0.05f},
               {1.0f, 50, 1.0f, 0.0f},
               {1.3f, 1000, 0.95f, 0.01f},
           }) {
        SamplingParams p;
        p.temperature = temperature;
        p.top_k = top_k;
        p.top_p = top_p;
        p.min_p = min_p;
        p.seed = rng();
        Sampler sampler(p);
        std::mt19937_64 reference_rng(p.seed);
        std::normal_distribution<float> normal(0.0f, spread);
        std::vector<float> logits(vocab);
        for (int i = 0; i < (vocab > 10000 ? 10 : 50); ++i) {
          for (float& l : logits) l = normal(rng);
          for (size_t j = 0; j < vocab; j += 3) logits[j] = logits[(j * 7) % vocab];  // many ties
          const int32_t expected = reference_draw(logits, p, reference_rng);
          auto copy = logits;
          ASSERT_EQ(sampler.sample(copy, {}), expected)
              << "vocab " << vocab << " spread " << spread << " temperature " << temperature << " top_k "
              << top_k << " top_p " << top_p << " min_p " << min_p << " draw " << i;
          ++draws;
        }
      }
    }
  }
  EXPECT_EQ(draws, 2 * 5 * (3 * 50 + 10));
}

TEST(Sampler, LowTemperatureConcentratesOnTheTop) {
  SamplingParams p;
  p.temperature = 0.01f;
  EXPECT_EQ(support(p, {1.0f, 1.5f, 0.2f}), (std::set<int32_t>{1}));
}

// Every parameter rejects values out of its range and NaN, with a message naming it.
TEST(Sampler, RejectsInvalidParameters) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto rejects = [](SamplingParams p, const std::string& name) {
    try {
      p.validate();
      ADD_FAILURE() << name << " accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(name));
    }
    EXPECT_THROW(Sampler{p}, Error);
  };
  const auto with = [](auto field, auto value) {
    SamplingParams p;
    p.*field = value;
    return p;
  };
  for (float bad : {-1.0f, nan, std::numeric_limits<float>::infinity()})
    rejects(with(&SamplingParams::temperature, bad), "temperature");
  rejects(with(&SamplingParams::top_k, -1), "top-k");
  for (float bad : {0.0f, 1.5f, nan}) rejects(with(&SamplingParams::top_p, bad), "top-p");
  for (float bad : {-0.1f, 1.5f, nan}) rejects(with(&SamplingParams::min_p, bad), "min-p");
  for (float bad : {0.0f, -1.0f, nan})
    rejects(with(&SamplingParams::repetition_penalty, bad), "repetition penalty");
  for (float bad : {-2.01f, 2.01f, nan}) {
    rejects(with(&SamplingParams::frequency_penalty, bad), "frequency_penalty");
    rejects(with(&SamplingParams::presence_penalty, bad), "presence_penalty");
  }
  for (float edge : {-2.0f, 2.0f}) {
    EXPECT_NO_THROW(with(&SamplingParams::frequency_penalty, edge).validate());
    EXPECT_NO_THROW(with(&SamplingParams::presence_penalty, edge).validate());
  }
}

}  // namespace
}  // namespace tokenmill
