// Properties of the reference quantisers beyond the fixtures: error bounds of a
// quantize -> dequantize round trip, stability when re-quantizing a decoded row, and zero
// rows / zero sub-blocks (scales of zero, decoded as exact zeros).
//
// Round-trip error bounds, relative RMS error on rows of N(0, 1), k = 4096; "measured" is
// the worst over 200 seeds (0..199 of testing::gaussian), the bound is ~10% above it:
//   type   measured  bound        type   measured  bound
//   q4_0   0.0889    0.095        q4_k   0.0741    0.080
//   q4_1   0.0805    0.088        q5_k   0.0372    0.040
//   q5_0   0.0445    0.048        q6_k   0.0183    0.020
//   q5_1   0.0390    0.043        q8_k   0.0076    0.0085
//   q8_0   0.0055    0.006        bf16   0.00173   0.0019
//   q8_1   0.0055    0.006        f16    0.00021   0.00024
//   mxfp4  0.1187    0.130
// (the best seed is within 10% of the worst for every type, so the tests also require the
// error to be at least 0.6 of the bound: a format quantizing too finely is a bug as well).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <vector>

#include "quant/quant_block_math.h"
#include "quant_test_util.h"

namespace tokenmill::quant {
namespace {

using testing::dequantized;
using testing::gaussian;
using testing::quantized;
using testing::relative_rms_error;

constexpr int64_t kRow = 4096;

double round_trip_bound(DType t) {
  switch (t) {
    case DType::Q4_0: return 0.095;
    case DType::Q4_1: return 0.088;
    case DType::Q5_0: return 0.048;
    case DType::Q5_1: return 0.043;
    case DType::Q8_0:
    case DType::Q8_1: return 0.006;
    case DType::MXFP4: return 0.130;
    case DType::Q4_K: return 0.080;
    case DType::Q5_K: return 0.040;
    case DType::Q6_K: return 0.020;
    case DType::Q8_K: return 0.0085;
    case DType::BF16: return 0.0019;
    case DType::F16: return 0.00024;
    case DType::F32: return 0.0;
  }
  return 0.0;
}

class QuantRoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(QuantRoundTrip, RelativeRmsErrorIsWithinTheStatedBound) {
  const DType t = GetParam();
  for (uint32_t seed = 0; seed < 8; ++seed) {
    const std::vector<float> x = gaussian(seed, kRow);
    const std::vector<float> y = dequantized(t, quantized(t, x), kRow);
    const double err = relative_rms_error(x, y);
    EXPECT_LE(err, round_trip_bound(t)) << "seed " << seed;
    // ... and not suspiciously good.
    EXPECT_GE(err, 0.6 * round_trip_bound(t)) << "seed " << seed;
  }
}

// Decoding is a fixed point of quantize -> dequantize: a row that is already exactly
// representable comes back with the same values (Q6_K may flip the sign of its super-block
// scale, turning +0 into -0, so values are compared, not bits). Q5_K's scale search can
// pick a different (not worse) fit for its own output, and Q8_K stores d = 1/iscale in
// f32, so those two are only required to move little (measured over 200 seeds: Q5_K
// drift <= 0.22 of the first round trip's error; Q8_K drift <= 6e-8 relative).
TEST_P(QuantRoundTrip, RequantizingADecodedRowIsStable) {
  const DType t = GetParam();
  for (uint32_t seed = 100; seed < 108; ++seed) {
    const std::vector<float> x = gaussian(seed, kRow);
    const std::vector<float> y = dequantized(t, quantized(t, x), kRow);
    const std::vector<float> y2 = dequantized(t, quantized(t, y), kRow);
    if (t == DType::Q5_K) {
      EXPECT_LE(relative_rms_error(y, y2), 0.3 * relative_rms_error(x, y)) << "seed " << seed;
    } else if (t == DType::Q8_K) {
      EXPECT_LE(relative_rms_error(y, y2), 1e-6) << "seed " << seed;
    } else {
      EXPECT_EQ(y, y2) << "seed " << seed;
    }
  }
}

TEST_P(QuantRoundTrip, ZeroRowsDecodeToZeros) {
  const DType t = GetParam();
  const std::vector<float> zeros(kRow, 0.0f);
  for (float v : dequantized(t, quantized(t, zeros), kRow)) ASSERT_EQ(v, 0.0f);
}

// A zero block (and, for the k-quants, a zero sub-block) inside a non-zero row decodes to
// exact zeros, and the row as a whole keeps its error bound.
TEST_P(QuantRoundTrip, ZeroBlocksInsideARowDecodeToZeros) {
  const DType t = GetParam();
  const int64_t block = dtype_block_size(t) == 1 ? 32 : dtype_block_size(t);
  std::vector<float> x = gaussian(7, kRow);
  for (int64_t i = block; i < 2 * block; ++i) x[static_cast<size_t>(i)] = 0.0f;           // block 1
  for (int64_t i = 3 * block; i < 3 * block + 32; ++i) x[static_cast<size_t>(i)] = 0.0f;  // part of block 3
  const std::vector<float> y = dequantized(t, quantized(t, x), kRow);
  for (int64_t i = block; i < 2 * block; ++i) ASSERT_EQ(y[static_cast<size_t>(i)], 0.0f) << i;
  if (t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K) {  // 32 zeros: whole sub-blocks
    for (int64_t i = 3 * block; i < 3 * block + 32; ++i) ASSERT_EQ(y[static_cast<size_t>(i)], 0.0f) << i;
  }
  EXPECT_LE(relative_rms_error(x, y), round_trip_bound(t));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantRoundTrip, ::testing::ValuesIn(testing::kAllTypes),
                         testing::DTypeName());

// The super-block scale fields of a zero super-block are +0: no NaN/inf from 0/0.
TEST(QuantZeroScales, KQuantSuperBlockScalesAreZero) {
  std::vector<float> x = gaussian(3, 512);
  std::fill(x.begin() + 256, x.end(), 0.0f);  // super-block 1 is zero
  {
    BlockQ4_K b[2];
    quantize_row(DType::Q4_K, x.data(), b, 512);
    EXPECT_NE(b[0].d, 0u);
    EXPECT_EQ(b[1].d, 0u);
    EXPECT_EQ(b[1].dmin, 0u);
    for (uint8_t s : b[1].scales) EXPECT_EQ(s, 0u);
  }
  {
    BlockQ5_K b[2];
    quantize_row(DType::Q5_K, x.data(), b, 512);
    EXPECT_NE(b[0].d, 0u);
    EXPECT_EQ(b[1].d, 0u);
    EXPECT_EQ(b[1].dmin, 0u);
  }
  {
    BlockQ6_K b[2];
    quantize_row(DType::Q6_K, x.data(), b, 512);
    EXPECT_NE(b[0].d, 0u);
    BlockQ6_K zero{};
    EXPECT_EQ(std::memcmp(&b[1], &zero, sizeof zero), 0);  // the whole block is zero bytes
  }
  {
    BlockQ8_K b[2];
    quantize_row(DType::Q8_K, x.data(), b, 512);
    EXPECT_NE(b[0].d, 0.0f);
    BlockQ8_K zero{};
    EXPECT_EQ(std::memcmp(&b[1], &zero, sizeof zero), 0);  // d, qs and bsums
  }
}

// MXFP4's scale: amax in [8, 16) * 2^(e - 128), and every magnitude rounds to the nearest of
// 0 1 2 3 4 6 8 12 times that (ties to the smaller one; past 14 it clamps to 12).
TEST(QuantMxfp4, ScaleAndValuesFollowTheBlockMaximum) {
  std::vector<float> x(64, 0.0f);
  const float in[] = {1.0f, 2.5f, -2.6f, 5.0f, -7.5f, 10.0f, 14.0f, -15.9f, 0.24f, -0.26f};
  const float want[] = {1.0f, 2.0f, -3.0f, 4.0f, -8.0f, 8.0f, 12.0f, -12.0f, 0.0f, 0.0f};
  for (size_t j = 0; j < std::size(in); ++j) {
    x[j] = in[j];
    x[32 + j] = in[j] * 0x1p-20f;  // block 1: the same, 2^20 smaller
  }
  const std::vector<unsigned char> q = quantized(DType::MXFP4, x);
  EXPECT_EQ(q[0], 128);                   // block 0's e: amax 15.9, d = 2^0
  EXPECT_EQ(q[sizeof(BlockMXFP4)], 108);  // block 1's: d = 2^-20
  const std::vector<float> y = dequantized(DType::MXFP4, q, 64);
  for (size_t j = 0; j < std::size(in); ++j) {
    EXPECT_EQ(y[j], want[j]) << j;
    EXPECT_EQ(y[32 + j], want[j] * 0x1p-20f) << j;
  }
}

// e8m0_half is 2^(e - 128) for every byte: e = 0, 1 are f32 subnormals, 255 is 2^127 (no NaN).
TEST(QuantMxfp4, E8m0ScaleOfEveryByte) {
  for (int e = 0; e < 256; ++e)
    EXPECT_EQ(block::e8m0_half(static_cast<uint8_t>(e)), std::ldexp(1.0f, e - 128)) << e;
  const int want[] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};  // ggml's kvalues_mxfp4
  for (int q = 0; q < 16; ++q) EXPECT_EQ(block::mxfp4_value(q), want[q]) << q;
}

// Q8_K's bsums are the sums of its levels over each 16 weights.
TEST(QuantZeroScales, Q8KBsumsAreSubBlockSums) {
  const std::vector<float> x = gaussian(11, 512, 3.0);
  BlockQ8_K b[2];
  quantize_row(DType::Q8_K, x.data(), b, 512);
  for (const BlockQ8_K& blk : b) {
    for (int s = 0; s < 16; ++s) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += blk.qs[16 * s + j];
      EXPECT_EQ(blk.bsums[s], sum) << s;
    }
  }
}

}  // namespace
}  // namespace tokenmill::quant
