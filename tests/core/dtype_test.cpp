// dtype conversions: exhaustive f16 round trip, f16 rounding against the hardware (F16C),
// bf16 round-to-nearest-even, NaN/infinity handling and the load/store helpers.
#include "core/dtype.h"

#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace tokenmill {
namespace {

bool f16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0; }

// The F16C instruction (part of the x86-64-v3 baseline) as the oracle: round to nearest even.
uint16_t hardware_f32_to_f16(float f) {
  return static_cast<uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0));
}
float hardware_f16_to_f32(uint16_t h) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))); }

TEST(DType, NamesAndSizes) {
  EXPECT_EQ(dtype_name(DType::F32), "f32");
  EXPECT_EQ(dtype_name(DType::BF16), "bf16");
  EXPECT_EQ(dtype_name(DType::F16), "f16");
  EXPECT_EQ(dtype_size(DType::F32), 4u);
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::F16), 2u);
}

TEST(DType, EveryF16ValueWidensExactlyAndRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f = f16_to_f32(h);
    const float want = hardware_f16_to_f32(h);
    if (f16_is_nan(h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << bits;
      ASSERT_TRUE(f16_is_nan(f32_to_f16(f))) << std::hex << bits;
      continue;
    }
    ASSERT_EQ(f32_to_bits(f), f32_to_bits(want)) << std::hex << bits;  // exact, signed zero included
    ASSERT_EQ(f32_to_f16(f), h) << std::hex << bits;
  }
}

TEST(DType, F16RoundingMatchesHardwareOnASweepOfAllFloats) {
  // Every 61st bit pattern of the 2^32 (all exponents, both signs) plus every pattern near
  // the f16 subnormal, normal and overflow boundaries.
  const auto check = [](uint32_t bits) {
    const float f = bits_to_f32(bits);
    const uint16_t got = f32_to_f16(f);
    const uint16_t want = hardware_f32_to_f16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(f16_is_nan(got)) << std::hex << bits;
    } else {
      ASSERT_EQ(got, want) << std::hex << bits << " = " << f;
    }
  };
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 61) check(static_cast<uint32_t>(bits));
  for (const uint32_t center : {0x33000000u, 0x38800000u, 0x477ff000u, 0x7f800000u, 0x3f800000u}) {
    for (uint32_t sign : {0u, 0x80000000u})
      for (uint32_t d = 0; d < 0x20000u; ++d) {
        check((center - 0x10000u + d) | sign);
      }
  }
}

TEST(DType, F16SpecialValues) {
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bffu);               // largest finite
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bffu);               // rounds down
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00u);               // ties to even: infinity
  EXPECT_EQ(f32_to_f16(-1e9f), 0xfc00u);                  // overflow keeps the sign
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001u);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000u);  // half of it: ties to even (0)
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001u);  // above half: rounds up
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000u);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::infinity()), 0x7c00u);
  EXPECT_TRUE(f16_is_nan(f32_to_f16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(f16_to_f32(0x3c00u), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000u), -2.0f);
}

TEST(DType, Bf16IsTheTopHalfOfF32) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const float f = bf16_to_f32(static_cast<uint16_t>(h));
    ASSERT_EQ(f32_to_bits(f), h << 16);
    if (!std::isnan(f)) {
      ASSERT_EQ(f32_to_bf16(f), h);  // exact values survive
    }
  }
}

TEST(DType, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is exactly halfway between bf16 1.0 (0x3f80) and the next value (0x3f81).
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f808000u)), 0x3f80u);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f818000u)), 0x3f82u);  // tie, odd rounds up to even
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f808001u)), 0x3f81u);  // above half
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f807fffu)), 0x3f80u);  // below half
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0xbf818000u)), 0xbf82u);  // negative tie
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x7f7fffffu)), 0x7f80u);  // FLT_MAX rounds to infinity
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80u);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000u);
  // NaN stays NaN, even one whose payload sits only in the low 16 bits.
  const uint16_t nan = f32_to_bf16(bits_to_f32(0x7f800001u));
  EXPECT_TRUE(std::isnan(bf16_to_f32(nan)));
}

TEST(DType, Bf16RoundingMatchesWideArithmeticOnRandomFloats) {
  std::mt19937 rng(7);
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t bits = rng();
    const float f = bits_to_f32(bits);
    if (std::isnan(f) || std::isinf(f)) continue;
    const uint16_t got = f32_to_bf16(f);
    // The two bf16 neighbours of f and the distance to each, in double.
    const uint16_t down = static_cast<uint16_t>(bits >> 16);
    const double lo = bf16_to_f32(down);
    const double hi = (down & 0x7fffu) == 0x7f7fu
                          ? std::ldexp(1.0, 128) * (f < 0 ? -1 : 1)
                          : static_cast<double>(bf16_to_f32(static_cast<uint16_t>(down + 1)));
    const double d_lo = std::abs(static_cast<double>(f) - lo), d_hi = std::abs(hi - static_cast<double>(f));
    const uint16_t want = d_lo < d_hi   ? down
                          : d_hi < d_lo ? static_cast<uint16_t>(down + 1)
                                        : static_cast<uint16_t>((down & 1u) ? down + 1 : down);
    ASSERT_EQ(got, want) << std::hex << bits;
  }
}

TEST(DType, LoadAndStoreInEveryDtype) {
  float f32_buf[2] = {};
  uint16_t half_buf[2] = {};
  store_from_f32(f32_buf, DType::F32, 1, 0.1f);
  EXPECT_EQ(load_as_f32(f32_buf, DType::F32, 1), 0.1f);
  store_from_f32(half_buf, DType::BF16, 1, 1.00390625f);  // 1 + 2^-8: tie, rounds to 1
  EXPECT_EQ(load_as_f32(half_buf, DType::BF16, 1), 1.0f);
  store_from_f32(half_buf, DType::F16, 0, 0.333333f);
  EXPECT_EQ(load_as_f32(half_buf, DType::F16, 0), hardware_f16_to_f32(hardware_f32_to_f16(0.333333f)));
}

}  // namespace
}  // namespace tokenmill
