// Byte counts as printed to people: gib() always in GiB, human_bytes() in the largest unit
// reached (binary units, two decimals), hand-checked.
#include "core/byte_units.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace tokenmill {
namespace {

TEST(ByteUnits, GibHasTwoDecimals) {
  EXPECT_EQ(gib(uint64_t{0}), "0.00 GiB");
  EXPECT_EQ(gib(uint64_t{3} << 29), "1.50 GiB");
  EXPECT_EQ(gib(uint64_t{24} << 30), "24.00 GiB");
  EXPECT_EQ(gib(1e6), "0.00 GiB");
}

TEST(ByteUnits, HumanBytesPicksTheLargestUnitReached) {
  EXPECT_EQ(human_bytes(0), "0 B");
  EXPECT_EQ(human_bytes(1023), "1023 B");
  EXPECT_EQ(human_bytes(1024), "1.00 KiB");
  EXPECT_EQ(human_bytes(1536), "1.50 KiB");
  EXPECT_EQ(human_bytes((uint64_t{1} << 20) - 1), "1024.00 KiB");  // 1023.999 rounds up in print only
  EXPECT_EQ(human_bytes(uint64_t{135} << 20), "135.00 MiB");
  EXPECT_EQ(human_bytes(uint64_t{5} << 29), "2.50 GiB");
  EXPECT_EQ(human_bytes(uint64_t{2} << 40), "2.00 TiB");
  EXPECT_EQ(human_bytes(uint64_t{3} << 50), "3072.00 TiB");  // no unit past TiB
  EXPECT_EQ(human_bytes(UINT64_MAX), "16777216.00 TiB");
}

}  // namespace
}  // namespace tokenmill
