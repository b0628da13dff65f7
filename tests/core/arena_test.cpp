// Arena: aligned carving, exhaustion as an Error, reset and peak tracking.
#include "core/arena.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace tokenmill {
namespace {

bool aligned(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data) % Arena::kAlignment == 0; }

TEST(Arena, CarvesAlignedDisjointTensors) {
  Arena arena(1024);
  const Tensor a = arena.allocate(DType::F32, {3});       // 12 bytes -> 64
  const Tensor b = arena.allocate(DType::BF16, {2, 40});  // 160 bytes -> 192
  EXPECT_TRUE(aligned(a));
  EXPECT_TRUE(aligned(b));
  EXPECT_EQ(static_cast<char*>(b.data) - static_cast<char*>(a.data), 64);
  EXPECT_EQ(arena.used(), 256u);
  EXPECT_EQ(b.shape_string(), "[2, 40] bf16");
}

TEST(Arena, FootprintRoundsUpToTheAlignment) {
  EXPECT_EQ(Arena::footprint(0), 0u);
  EXPECT_EQ(Arena::footprint(1), 64u);
  EXPECT_EQ(Arena::footprint(64), 64u);
  EXPECT_EQ(Arena::footprint(65), 128u);
  EXPECT_EQ(Arena(100).capacity(), 128u);
}

TEST(Arena, ExhaustionThrowsAndLeavesTheArenaUsable) {
  Arena arena(256);
  arena.allocate(DType::F32, {32});  // 128 bytes
  EXPECT_THROW(arena.allocate(DType::F32, {64}), Error);
  EXPECT_EQ(arena.used(), 128u);
  EXPECT_NO_THROW(arena.allocate(DType::F32, {32}));
  EXPECT_EQ(arena.used(), 256u);
  EXPECT_THROW(arena.allocate(DType::F32, {1}), Error);
  EXPECT_THROW(arena.allocate(DType::F32, {1ll << 62, 4}), Error);  // size overflow
}

TEST(Arena, ResetReusesMemoryAndKeepsThePeak) {
  Arena arena(512);
  const Tensor first = arena.allocate(DType::F32, {64});
  arena.allocate(DType::F32, {16});
  EXPECT_EQ(arena.peak(), 320u);
  arena.reset();
  EXPECT_EQ(arena.used(), 0u);
  const Tensor again = arena.allocate(DType::F32, {8});
  EXPECT_EQ(again.data, first.data);
  EXPECT_EQ(arena.peak(), 320u);
}

TEST(Arena, EmptyArenaAndEmptyTensors) {
  Arena arena(0);
  EXPECT_EQ(arena.capacity(), 0u);
  EXPECT_NO_THROW(arena.allocate(DType::F32, {0, 5}));
  EXPECT_THROW(arena.allocate(DType::F32, {1}), Error);
}

}  // namespace
}  // namespace tokenmill
