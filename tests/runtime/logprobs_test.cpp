// token_logprob: against a plain double log-softmax and a full sort on random rows, no
// overflow on huge or very negative logits, ties to the lower id, the top_n bounds, errors.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "runtime/logprobs.h"

namespace tokenmill {
namespace {

// log(exp(l[i]) / sum_j exp(l[j])) the textbook way: fine for the modest logits used here.
std::vector<double> reference_log_softmax(const std::vector<float>& logits) {
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l));
  std::vector<double> out;
  for (float l : logits) out.push_back(std::log(std::exp(static_cast<double>(l)) / sum));
  return out;
}

TEST(Logprobs, MatchesAPlainLogSoftmaxAndAFullSortOnRandomRows) {
  std::mt19937 rng(7);
  for (size_t vocab : {1u, 2u, 21u, 1000u, 50257u}) {
    std::normal_distribution<float> dist(0.0f, 4.0f);
    std::vector<float> logits(vocab);
    for (float& l : logits) l = dist(rng);
    const std::vector<double> expected = reference_log_softmax(logits);
    std::vector<int32_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
    });
    const auto token = static_cast<int32_t>(rng() % vocab);
    const TokenLogprob got = token_logprob(logits, token, 20);
    EXPECT_EQ(got.token, token);
    EXPECT_NEAR(got.logprob, expected[static_cast<size_t>(token)], 1e-5) << "vocab " << vocab;
    ASSERT_EQ(got.top.size(), std::min<size_t>(20, vocab));
    for (size_t i = 0; i < got.top.size(); ++i) {
      EXPECT_EQ(got.top[i].token, order[i]) << "rank " << i << " vocab " << vocab;
      EXPECT_NEAR(got.top[i].logprob, expected[static_cast<size_t>(order[i])], 1e-5);
    }
  }
}

TEST(Logprobs, HugeAndVeryNegativeLogitsDoNotOverflow) {
  // exp(1e4) overflows even a double; a shift by the max keeps every term <= 1.
  const std::vector<float> logits = {1e4f, 1e4f - 1.0f, -1e30f, -INFINITY};
  const TokenLogprob got = token_logprob(logits, 1, 4);
  const double log_sum = std::log(1.0 + std::exp(-1.0));
  EXPECT_NEAR(got.logprob, -1.0 - log_sum, 1e-6);
  ASSERT_EQ(got.top.size(), 4u);
  EXPECT_NEAR(got.top[0].logprob, -log_sum, 1e-6);
  EXPECT_EQ(got.top[2].token, 2);
  EXPECT_FLOAT_EQ(got.top[2].logprob, -1e30f);
  EXPECT_EQ(got.top[3].token, 3);
  EXPECT_EQ(got.top[3].logprob, -INFINITY);
}

TEST(Logprobs, TiesGoToTheLowerId) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, 2.0f, 3.0f};
  const TokenLogprob got = token_logprob(logits, 0, 4);
  std::vector<int32_t> ids;
  for (const TopLogprob& t : got.top) ids.push_back(t.token);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 3, 5, 2}));
  const double sum = std::exp(1.0) + 3 * std::exp(3.0) + 2 * std::exp(2.0);
  EXPECT_NEAR(got.top[0].logprob, std::log(std::exp(3.0) / sum), 1e-6);
  EXPECT_NEAR(got.top[3].logprob, std::log(std::exp(2.0) / sum), 1e-6);
}

TEST(Logprobs, TopNZeroGivesOnlyTheChosenToken) {
  const std::vector<float> logits = {0.0f, 0.0f};
  const TokenLogprob got = token_logprob(logits, 1, 0);
  EXPECT_TRUE(got.top.empty());
  EXPECT_NEAR(got.logprob, std::log(0.5), 1e-7);
}

TEST(Logprobs, RejectsATokenOutsideTheRowAndTopNOutOfRange) {
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f};
  EXPECT_THROW(token_logprob(logits, -1, 0), Error);
  EXPECT_THROW(token_logprob(logits, 3, 0), Error);
  EXPECT_THROW(token_logprob({}, 0, 0), Error);
  EXPECT_THROW(token_logprob(logits, 0, -1), Error);
  EXPECT_THROW(token_logprob(logits, 0, 21), Error);
}

}  // namespace
}  // namespace tokenmill
