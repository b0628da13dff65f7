// vec_dot_row: the integer block dot products against a double-precision dot of the two
// decoded rows, plus hand-made blocks whose result is known exactly.
//
// Tolerance: |vec_dot_row - reference| <= 1e-6 * sum_i |w_i * a_i| (w, a decoded rows),
// room for f32 rounding of the per-block scaling and of the sum over blocks. Measured worst
// over 200 seeds: 1.1e-7 for f32/bf16/f16 (one f32 addition per element), 2.3e-8 for the
// 32-weight formats, 9e-9 for the k-quants. For Q4_1 / Q5_1 the reference takes the min
// term with the Q8_1 block's stored s (an f16 of d * sum(q), not exactly f16(d) * sum(q))
// as ggml does; ignoring that would be off by ~4e-5.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "quant_test_util.h"

namespace tokenmill::quant {
namespace {

using testing::dequantized;
using testing::gaussian;
using testing::quantized;

constexpr int64_t kRow = 4096;

// sum over blocks of m_w * (s_a - d_a * sum(q_a)): what the stored s adds to the plain dot.
template <class WeightBlock>
double q8_1_min_correction(const std::vector<unsigned char>& w, const std::vector<unsigned char>& a) {
  double sum = 0;
  for (size_t b = 0; b < w.size() / sizeof(WeightBlock); ++b) {
    WeightBlock x;
    BlockQ8_1 y;
    std::memcpy(&x, w.data() + b * sizeof x, sizeof x);
    std::memcpy(&y, a.data() + b * sizeof y, sizeof y);
    int q_sum = 0;
    for (int8_t q : y.qs) q_sum += q;
    const double s_exact = static_cast<double>(f16_to_f32(y.d)) * q_sum;
    sum += static_cast<double>(f16_to_f32(x.m)) * (static_cast<double>(f16_to_f32(y.s)) - s_exact);
  }
  return sum;
}

class QuantVecDot : public ::testing::TestWithParam<DType> {};

TEST_P(QuantVecDot, MatchesADoubleDotOfTheDecodedRows) {
  const DType t = GetParam();
  const DType act = activation_type(t);
  for (uint32_t seed = 0; seed < 4; ++seed) {
    const std::vector<unsigned char> w = quantized(t, gaussian(seed, kRow));
    const std::vector<unsigned char> a = quantized(act, gaussian(seed + 1000, kRow, 2.0));
    const std::vector<float> dw = dequantized(t, w, kRow), da = dequantized(act, a, kRow);
    double want = 0, magnitude = 0;
    for (size_t i = 0; i < dw.size(); ++i) {
      want += static_cast<double>(dw[i]) * static_cast<double>(da[i]);
      magnitude += std::fabs(static_cast<double>(dw[i]) * static_cast<double>(da[i]));
    }
    if (t == DType::Q4_1) want += q8_1_min_correction<BlockQ4_1>(w, a);
    if (t == DType::Q5_1) want += q8_1_min_correction<BlockQ5_1>(w, a);
    const float got = vec_dot_row(t, w.data(), a.data(), kRow);
    EXPECT_NEAR(got, want, 1e-6 * magnitude) << "seed " << seed << ", sum |w a| = " << magnitude;
  }
}

INSTANTIATE_TEST_SUITE_P(WeightTypes, QuantVecDot, ::testing::ValuesIn(testing::kWeightTypes),
                         testing::DTypeName());

// Two hand-made Q8_0 blocks with exactly representable scales: the result is exact.
//   block 0: q_w = q_a = -128 everywhere, d_w = 1, d_a = 0.5:  32 * 16384 * 0.5 = 262144
//   block 1: q_w[j] = j - 16, q_a[j] = 2j - 31, d_w = 2, d_a = 0.25:
//            sum (j - 16)(2j - 31) = 2*10416 - 63*496 + 32*496 = 5456; * 0.5 = 2728
TEST(QuantVecDotExact, Q8_0TimesQ8_0HandMadeBlocks) {
  BlockQ8_0 w[2], a[2];
  w[0].d = f32_to_f16(1.0f);
  a[0].d = f32_to_f16(0.5f);
  w[1].d = f32_to_f16(2.0f);
  a[1].d = f32_to_f16(0.25f);
  for (int j = 0; j < 32; ++j) {
    w[0].qs[j] = a[0].qs[j] = -128;
    w[1].qs[j] = static_cast<int8_t>(j - 16);
    a[1].qs[j] = static_cast<int8_t>(2 * j - 31);
  }
  EXPECT_EQ(vec_dot_row(DType::Q8_0, w, a, 64), 262144.0f + 2728.0f);
  EXPECT_EQ(vec_dot_row(DType::Q8_0, &w[1], &a[1], 32), 2728.0f);
}

// An MXFP4 block whose weight j has nibble j % 16 (values v = 0 1 2 3 4 6 8 12 0 -1 ... -12)
// against Q8_0 levels j - 16: sum v(j % 16) (j - 16) = -576, scaled by f16(d_a) * 2^(e - 128)
// exactly for the ordinary, the two subnormal-scale ends and the top scale byte (2^127).
TEST(QuantVecDotExact, Mxfp4TimesQ8_0HandMadeBlocks) {
  BlockMXFP4 w{};
  for (int i = 0; i < 16; ++i) w.qs[i] = static_cast<uint8_t>(i | (i << 4));
  BlockQ8_0 a{};
  for (int j = 0; j < 32; ++j) a.qs[j] = static_cast<int8_t>(j - 16);
  const struct {
    uint8_t e;
    uint16_t d_a;
    float want;
  } cases[] = {{126, f32_to_f16(0.5f), -72.0f},
               {0, f32_to_f16(0.5f), std::ldexp(-576.0f, -129)},
               {1, f32_to_f16(2.0f), std::ldexp(-576.0f, -126)},
               {255, 0x0001, std::ldexp(-576.0f, 103)}};  // d_a = 2^-24, the smallest f16
  for (const auto& c : cases) {
    w.e = c.e;
    a.d = c.d_a;
    EXPECT_EQ(vec_dot_row(DType::MXFP4, &w, &a, 32), c.want) << "e = " << int{c.e};
  }
}

// Q4_K with every level 15, scale 1, min 1 (d = dmin = 1) against Q8_K levels of 1 (d = 1):
// each weight is 15 - 1 = 14, so the dot is 256 * 14, via isum = 8 * 32 * 15 and the
// bsums min term 16 * 16 * 1.
TEST(QuantVecDotExact, Q4KMinTermUsesBsums) {
  BlockQ4_K w{};
  w.d = w.dmin = f32_to_f16(1.0f);
  for (int j = 0; j < 4; ++j) w.scales[j] = w.scales[j + 4] = 1;  // sub-blocks 0-3: scale 1, min 1
  for (int j = 8; j < 12; ++j) w.scales[j] = 0x11;                // sub-blocks 4-7: scale 1, min 1
  std::memset(w.qs, 0xFF, sizeof w.qs);
  BlockQ8_K a{};
  a.d = 1.0f;
  for (int8_t& q : a.qs) q = 1;
  for (int16_t& s : a.bsums) s = 16;
  EXPECT_EQ(vec_dot_row(DType::Q4_K, &w, &a, 256), 256.0f * 14.0f);
}

// Plain weights take f32 activations and sum in f32 in index order.
TEST(QuantVecDotExact, PlainTypesSumInIndexOrder) {
  const std::vector<float> w = gaussian(1, 1000), a = gaussian(2, 1000);
  // Product and sum as separate statements: never contracted into an FMA, whatever the flags.
  float want = 0.0f;
  for (size_t i = 0; i < w.size(); ++i) {
    const float product = w[i] * a[i];
    want += product;
  }
  EXPECT_EQ(vec_dot_row(DType::F32, w.data(), a.data(), 1000), want);

  const std::vector<unsigned char> h = quantized(DType::F16, w);
  const std::vector<float> hw = dequantized(DType::F16, h, 1000);
  float want_f16 = 0.0f;
  for (size_t i = 0; i < w.size(); ++i) {
    const float product = hw[i] * a[i];
    want_f16 += product;
  }
  EXPECT_EQ(vec_dot_row(DType::F16, h.data(), a.data(), 1000), want_f16);
}

}  // namespace
}  // namespace tokenmill::quant
