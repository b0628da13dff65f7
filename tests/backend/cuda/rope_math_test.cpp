// RoPE's per-pair math of the CUDA kernel (rope_math.h), run on the CPU: the pair layouts,
// the rotation against the float64 reference at positions up to 131072 (1e-5 of the
// output's largest magnitude, the conformance tolerance), and the inverse.
#include "backend/cuda/rope_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/conformance_harness.h"
#include "backend/reference/reference_backward.h"
#include "backend/reference/reference_ops.h"

namespace tokenmill::cuda {
namespace {

using testing::close_to_reference;

constexpr double kF32 = 1e-5;

TEST(RopeMath, PairsCoverTheRotatedElementsOnce) {
  for (const bool neox : {true, false}) {
    for (const int64_t half : {1, 3, 8, 64}) {
      std::set<int64_t> seen;
      for (int64_t j = 0; j < half; ++j) {
        const RopePair p = rope_pair(neox, j, half);
        EXPECT_TRUE(seen.insert(p.first).second);
        EXPECT_TRUE(seen.insert(p.second).second);
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), 2 * half);
      EXPECT_EQ(*seen.begin(), 0);
      EXPECT_EQ(*seen.rbegin(), 2 * half - 1);
    }
  }
  EXPECT_EQ(rope_pair(true, 2, 8).second, 10);  // rotate_half: (j, j + half)
  EXPECT_EQ(rope_pair(false, 2, 8).first, 4);   // GPT-J: (2j, 2j + 1)
  EXPECT_EQ(rope_pair(false, 2, 8).second, 5);
}

struct RopeCase {
  int64_t n, heads, head_dim, rotary_dim;
};

// x [n, heads, head_dim] rotated as the kernel does it: one rotation per (token, pair),
// applied to every head.
void rotate(std::vector<float>& x, const RopeCase& c, const std::vector<int32_t>& positions,
            const std::vector<float>& inv_freq, RopeMode mode) {
  const int64_t half = c.rotary_dim / 2;
  for (int64_t t = 0; t < c.n; ++t) {
    for (int64_t j = 0; j < half; ++j) {
      const RopeRotation r =
          rope_rotation(positions[static_cast<size_t>(t)], inv_freq[static_cast<size_t>(j)], mode);
      const RopePair p = rope_pair(mode.neox, j, half);
      for (int64_t h = 0; h < c.heads; ++h) {
        float* head = x.data() + (t * c.heads + h) * c.head_dim;
        rope_rotate(head[p.first], head[p.second], r);
      }
    }
  }
}

TEST(RopeMath, MatchesReferenceAtLargePositions) {
  const RopeCase cases[] = {{1, 4, 16, 16}, {13, 3, 10, 6}, {7, 3, 80, 32}, {4, 2, 128, 128}, {3, 5, 64, 16}};
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (const int32_t max_position : {8191, 131072}) {
    std::uniform_int_distribution<int32_t> position(0, max_position);
    for (const bool neox : {true, false}) {
      for (const RopeCase& c : cases) {
        SCOPED_TRACE(std::string(neox ? "neox" : "interleaved") + " head_dim=" + std::to_string(c.head_dim) +
                     " rotary=" + std::to_string(c.rotary_dim) +
                     " max_position=" + std::to_string(max_position));
        std::vector<float> x(static_cast<size_t>(c.n * c.heads * c.head_dim));
        for (float& v : x) v = value(rng);
        std::vector<float> inv_freq(static_cast<size_t>(c.rotary_dim / 2));
        for (size_t j = 0; j < inv_freq.size(); ++j)
          inv_freq[j] = static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(j) / c.rotary_dim));
        std::vector<int32_t> positions(static_cast<size_t>(c.n));
        for (int32_t& p : positions) p = position(rng);
        positions[0] = max_position;
        const Tensor x_view(x.data(), DType::F32, {c.n, c.heads, c.head_dim});
        const Tensor freq_view(inv_freq.data(), DType::F32, {static_cast<int64_t>(inv_freq.size())});
        const RopeLayout layout = neox ? RopeLayout::Neox : RopeLayout::Interleaved;
        const float magnitude = neox ? 1.1902f : 1.0f;  // LongRoPE's attention factor, or none
        const auto want_forward = reference::rope(x_view, positions, freq_view, layout, magnitude);
        const auto want_backward = reference::rope_backward(x_view, positions, freq_view, layout, magnitude);
        const std::vector<float> original = x;

        rotate(x, c, positions, inv_freq, {neox, false, magnitude});
        EXPECT_TRUE(close_to_reference(x, want_forward, kF32));
        x = original;
        rotate(x, c, positions, inv_freq, {neox, true, magnitude});
        EXPECT_TRUE(close_to_reference(x, want_backward, kF32));
        rotate(x, c, positions, inv_freq, {neox, false, 1.0f / magnitude});  // R R^T = 1
        EXPECT_TRUE(close_to_reference(x, std::vector<double>(original.begin(), original.end()), kF32));
      }
    }
  }
}

TEST(RopeMath, RotationIsAccurateAtLargePositions) {
  // cos/sin of the exact product position * inv_freq, each within 1e-7 (f32 rounding) of
  // the long-double value; an f32 angle would be off by up to ~4e-3 rad here.
  for (const int32_t position : {131071, 100003, 65537}) {
    for (const float inv_freq : {1.0f, 0.8f, 0.0123f, 1e-4f}) {
      const long double angle = static_cast<long double>(position) * inv_freq;
      const RopeRotation r = rope_rotation(position, inv_freq, {true, false, 1.0f});
      EXPECT_NEAR(r.cos, std::cos(angle), 1e-7) << position << " " << inv_freq;
      EXPECT_NEAR(r.sin, std::sin(angle), 1e-7) << position << " " << inv_freq;
      const RopeRotation back = rope_rotation(position, inv_freq, {true, true, 1.0f});
      EXPECT_EQ(back.cos, r.cos);
      EXPECT_EQ(back.sin, -r.sin);
    }
  }
}

}  // namespace
}  // namespace tokenmill::cuda
