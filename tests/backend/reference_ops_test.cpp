// The float64 reference checked on cases small enough to work out by hand: the oracle of
// the conformance suite must itself be right.
#include "backend/reference/reference_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "core/error.h"

namespace tokenmill {
namespace {

Tensor f32(std::vector<float>& v, std::initializer_list<int64_t> dims) {
  return Tensor(v.data(), DType::F32, dims);
}

TEST(ReferenceOps, MatmulIsXTimesWTransposedPlusBias) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6};      // [2, 3]
  std::vector<float> w = {1, 0, -1, 2, 1, 0.5f};  // [2, 3]
  std::vector<float> b = {10, 20};
  const auto y = reference::matmul(f32(x, {2, 3}), f32(w, {2, 3}), nullptr);
  EXPECT_EQ(y, (std::vector<double>{-2, 5.5, -2, 16}));
  const Tensor bias = f32(b, {2});
  const auto yb = reference::matmul(f32(x, {2, 3}), f32(w, {2, 3}), &bias);
  EXPECT_EQ(yb, (std::vector<double>{8, 25.5, 8, 36}));
}

TEST(ReferenceOps, AddLoraAddsEachSegmentsShrinkThenExpand) {
  std::vector<float> x = {1, 2, 5, 6, 7, 8};     // [3, 2]
  std::vector<float> y = {0.5f, 1, 2, 3, 4, 5};  // [3, 2]
  std::vector<float> a1 = {1, 2}, b1 = {3, 4};   // rank 1: t = 5 + 12 = 17
  std::vector<float> a2 = {1, 0, 0, 1};          // rank 2: t = x itself
  std::vector<float> b2 = {1, 1, 0, 2};
  const Tensor ta1 = f32(a1, {1, 2}), tb1 = f32(b1, {2, 1}), ta2 = f32(a2, {2, 2}), tb2 = f32(b2, {2, 2});
  const std::vector<Backend::LoraSegment> segments = {{.first_row = 1, .rows = 1, .a = &ta1, .b = &tb1},
                                                      {.first_row = 2, .rows = 1, .a = &ta2, .b = &tb2}};
  // Row 0 is covered by no segment; row 1 += 17 [3, 4]; row 2 += [7 + 8, 2 * 8].
  EXPECT_EQ(reference::add_lora(f32(x, {3, 2}), segments, f32(y, {3, 2})),
            (std::vector<double>{0.5, 1, 53, 71, 19, 21}));
}

TEST(ReferenceOps, EmbeddingReadsBf16Rows) {
  std::vector<uint16_t> table = {f32_to_bf16(1.5f), f32_to_bf16(-2.0f), f32_to_bf16(0.25f),
                                 f32_to_bf16(8.0f)};
  const Tensor t(table.data(), DType::BF16, {2, 2});
  const std::vector<int32_t> ids = {1, 0, 1};
  EXPECT_EQ(reference::embedding(t, ids), (std::vector<double>{0.25, 8, 1.5, -2, 0.25, 8}));
  const std::vector<int32_t> bad = {2};
  EXPECT_THROW(reference::embedding(t, bad), Error);
}

TEST(ReferenceOps, Norms) {
  std::vector<float> x = {3, 4};
  std::vector<float> w = {1, 2};
  std::vector<float> b = {0.5f, -0.5f};
  const auto rms = reference::rms_norm(f32(x, {1, 2}), f32(w, {2}), 0.0f);  // rms = sqrt(12.5)
  EXPECT_NEAR(rms[0], 3 / std::sqrt(12.5), 1e-15);
  EXPECT_NEAR(rms[1], 8 / std::sqrt(12.5), 1e-15);
  const auto ln =
      reference::layer_norm(f32(x, {1, 2}), f32(w, {2}), f32(b, {2}), 0.0f);  // mean 3.5, var 0.25
  EXPECT_NEAR(ln[0], -1 + 0.5, 1e-15);
  EXPECT_NEAR(ln[1], 2 - 0.5, 1e-15);
}

TEST(ReferenceOps, Activations) {
  std::vector<float> x = {1, -2};
  const auto erf = reference::gelu(f32(x, {2}), GeluForm::Erf);
  EXPECT_NEAR(erf[0], 0.8413447460685429, 1e-15);
  EXPECT_NEAR(erf[1], -0.0455002638963584, 1e-15);
  const auto tanh = reference::gelu(f32(x, {2}), GeluForm::Tanh);
  EXPECT_NEAR(tanh[0], 0.8411919906082768, 1e-15);
  EXPECT_NEAR(tanh[1], -0.04540230591222, 1e-13);
  const auto silu = reference::silu(f32(x, {2}));
  EXPECT_NEAR(silu[0], 1 / (1 + std::exp(-1.0)), 1e-15);
  std::vector<float> up = {2, 3};
  const auto sw = reference::swiglu(f32(x, {2}), f32(up, {2}));
  EXPECT_NEAR(sw[1], 3 * -2 / (1 + std::exp(2.0)), 1e-15);
  EXPECT_EQ(reference::add(f32(x, {2}), f32(up, {2})), (std::vector<double>{3, 1}));
}

TEST(ReferenceOps, SoftmaxOfLogsIsNormalised) {
  std::vector<float> x = {0.0f, static_cast<float>(std::log(3.0))};
  const auto y = reference::softmax(f32(x, {1, 2}));
  EXPECT_NEAR(y[0], 0.25, 1e-7);
  EXPECT_NEAR(y[1], 0.75, 1e-7);
}

TEST(ReferenceOps, RopeRotatesTheRightPairs) {
  // One head of 4: inv_freq {pi/2 (as f32), 0}; position 1 turns pair 0 by 90 degrees.
  std::vector<float> freq = {static_cast<float>(std::numbers::pi / 2), 0.0f};
  std::vector<float> x = {1, 2, 3, 4};
  const auto neox =
      reference::rope(f32(x, {1, 1, 4}), std::vector<int32_t>{1}, f32(freq, {2}), RopeLayout::Neox, 1.0f);
  // Neox pairs (0, 2) and (1, 3): (1, 3) -> (-3, 1); (2, 4) unrotated.
  EXPECT_NEAR(neox[0], -3, 1e-6);
  EXPECT_NEAR(neox[2], 1, 1e-6);
  EXPECT_NEAR(neox[1], 2, 1e-12);
  EXPECT_NEAR(neox[3], 4, 1e-12);
  const auto inter = reference::rope(f32(x, {1, 1, 4}), std::vector<int32_t>{1}, f32(freq, {2}),
                                     RopeLayout::Interleaved, 1.0f);
  // Interleaved pairs (0, 1) and (2, 3): (1, 2) -> (-2, 1).
  EXPECT_NEAR(inter[0], -2, 1e-6);
  EXPECT_NEAR(inter[1], 1, 1e-6);
  EXPECT_NEAR(inter[2], 3, 1e-12);
  EXPECT_NEAR(inter[3], 4, 1e-12);
}

TEST(ReferenceOps, AttentionIsCausalAndGrouped) {
  // 2 query heads share 1 kv head of dim 1; cache rows: k = {0, 0}, v = {1, 3}.
  std::vector<float> q = {5, -5, 1, 1};  // [2 tokens, 2 heads, 1]
  std::vector<float> k = {0, 0, 99};     // row 2 is beyond the filled part
  std::vector<float> v = {1, 3, 99};
  const auto out = reference::attention(f32(q, {2, 2, 1}), f32(k, {3, 1, 1}), f32(v, {3, 1, 1}), 0, 1.0f);
  // Token 0 sees only position 0; token 1 sees positions 0 and 1 with equal scores.
  EXPECT_EQ(out, (std::vector<double>{1, 1, 2, 2}));
}

}  // namespace
}  // namespace tokenmill
