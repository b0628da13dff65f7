// Routing tokens to experts: the k best-scored experts per token with softmax weights
// (renormalised or not), ties to the lower index, and the gather order that groups each
// expert's tokens.
#include "model/expert_routing.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"

namespace tokenmill {
namespace {

// Softmax of one token's scores, in double.
std::vector<double> softmax(const std::vector<float>& s) {
  double top = s[0], sum = 0;
  for (const float v : s) top = std::max(top, static_cast<double>(v));
  std::vector<double> p;
  for (const float v : s) sum += p.emplace_back(std::exp(v - top));
  for (double& v : p) v /= sum;
  return p;
}

TEST(ExpertRouting, PicksTheBestScoredExpertsWithSoftmaxWeights) {
  // 3 tokens, 4 experts, 2 per token.
  const std::vector<float> scores = {0.5f,  2.0f, -1.0f, 1.0f,    // experts 1, 3
                                     3.0f,  0.0f, 0.1f,  -2.0f,   // experts 0, 2
                                     -1.0f, 0.2f, 0.3f,  0.25f};  // experts 2, 3
  for (const bool normalize : {false, true}) {
    SCOPED_TRACE(normalize ? "renormalised" : "softmax over all experts");
    ExpertRouting r;
    route_to_experts(scores, 3, 4, 2, normalize, r);
    EXPECT_EQ(r.chosen_experts, (std::vector<int32_t>{1, 3, 0, 2, 2, 3}));
    const int expected_experts[3][2] = {{1, 3}, {0, 2}, {2, 3}};
    for (int t = 0; t < 3; ++t) {
      const auto p = softmax(std::vector<float>(scores.begin() + 4 * t, scores.begin() + 4 * t + 4));
      const double a = p[static_cast<size_t>(expected_experts[t][0])];
      const double b = p[static_cast<size_t>(expected_experts[t][1])];
      const double scale = normalize ? 1 / (a + b) : 1;
      EXPECT_NEAR(r.weights[static_cast<size_t>(2 * t)], a * scale, 1e-6);
      EXPECT_NEAR(r.weights[static_cast<size_t>(2 * t + 1)], b * scale, 1e-6);
    }
    // Slots grouped by expert, tokens ascending within: expert 0 {t1}, 1 {t0}, 2 {t1, t2}, 3 {t0, t2}.
    EXPECT_EQ(r.expert_begin, (std::vector<int64_t>{0, 1, 2, 4, 6}));
    EXPECT_EQ(r.slot_tokens, (std::vector<int32_t>{1, 0, 1, 2, 0, 2}));
    for (size_t c = 0; c < r.slots.size(); ++c) {
      const auto slot = static_cast<size_t>(r.slots[c]);
      EXPECT_EQ(r.slot_tokens[slot], static_cast<int32_t>(c / 2)) << "choice " << c;
      EXPECT_GE(static_cast<int64_t>(slot), r.expert_begin[static_cast<size_t>(r.chosen_experts[c])]);
      EXPECT_LT(static_cast<int64_t>(slot), r.expert_begin[static_cast<size_t>(r.chosen_experts[c]) + 1]);
    }
  }
}

TEST(ExpertRouting, TiesGoToTheLowerIndexAndAllExpertsMayBeChosen) {
  const std::vector<float> equal = {1.0f, 1.0f, 1.0f, 1.0f};
  ExpertRouting r;
  route_to_experts(equal, 1, 4, 3, true, r);
  EXPECT_EQ(r.chosen_experts, (std::vector<int32_t>{0, 1, 2}));
  for (const float w : r.weights) EXPECT_FLOAT_EQ(w, 1.0f / 3);
  route_to_experts(equal, 1, 4, 4, false, r);
  EXPECT_EQ(r.chosen_experts, (std::vector<int32_t>{0, 1, 2, 3}));
  for (const float w : r.weights) EXPECT_FLOAT_EQ(w, 0.25f);
}

TEST(ExpertRouting, LargeScoresDoNotOverflow) {
  const std::vector<float> scores = {1000.0f, 999.0f, -1000.0f};
  ExpertRouting r;
  route_to_experts(scores, 1, 3, 2, false, r);
  EXPECT_EQ(r.chosen_experts, (std::vector<int32_t>{0, 1}));
  EXPECT_NEAR(r.weights[0], 1 / (1 + std::exp(-1.0)), 1e-6);
  EXPECT_TRUE(std::isfinite(r.weights[1]));
}

TEST(ExpertRouting, RejectsBadCounts) {
  ExpertRouting r;
  const std::vector<float> scores(8, 0.0f);
  EXPECT_THROW(route_to_experts(scores, 2, 4, 0, true, r), Error);
  EXPECT_THROW(route_to_experts(scores, 2, 4, 5, true, r), Error);
  EXPECT_THROW(route_to_experts(scores, 3, 4, 2, true, r), Error);
  route_to_experts(std::vector<float>{}, 0, 4, 2, true, r);  // an empty step routes nothing
  EXPECT_TRUE(r.slot_tokens.empty());
}

}  // namespace
}  // namespace tokenmill
