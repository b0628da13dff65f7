// Overflow-checked size arithmetic: exact results in range, Error naming `what` outside.
#include "core/checked_math.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace tokenmill {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

TEST(CheckedMath, AddAndMultiplyInRange) {
  EXPECT_EQ(checked_add(2, 3, "x"), 5u);
  EXPECT_EQ(checked_add(kMax - 1, 1, "x"), kMax);
  EXPECT_EQ(checked_mul(0, kMax, "x"), 0u);
  EXPECT_EQ(checked_mul(1ull << 32, (1ull << 32) - 1, "x"), (1ull << 32) * ((1ull << 32) - 1));
}

TEST(CheckedMath, OverflowThrowsAndNamesWhat) {
  EXPECT_THROW(checked_add(kMax, 1, "x"), Error);
  EXPECT_THROW(checked_mul(1ull << 32, 1ull << 32, "x"), Error);
  try {
    checked_mul(kMax, 2, "tensor 'wte' size");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'wte' size"), std::string::npos) << e.what();
  }
}

TEST(CheckedMath, ProductOfDimensions) {
  EXPECT_EQ(checked_product({}, "x"), 1u);
  EXPECT_EQ(checked_product({2, 3, 4}, "x"), 24u);
  EXPECT_EQ(checked_product({5, 0, 7}, "x"), 0u);
  EXPECT_THROW(checked_product({2, -1}, "x"), Error);
  EXPECT_THROW(checked_product({1ll << 40, 1ll << 40}, "x"), Error);
}

TEST(CheckedMath, NarrowingToInt64) {
  EXPECT_EQ(checked_to_int64(0, "x"), 0);
  EXPECT_EQ(checked_to_int64(static_cast<uint64_t>(INT64_MAX), "x"), INT64_MAX);
  EXPECT_THROW(checked_to_int64(static_cast<uint64_t>(INT64_MAX) + 1, "x"), Error);
}

}  // namespace
}  // namespace tokenmill
