// A gradient check per parameter tensor: the analytic directional derivative along a random
// +-1 direction within the tensor against a central finite difference of the loss along it
// (step 1e-2 / sqrt(numel)), to 3e-3 absolute + 3e-2 relative. And a bit-for-bit comparison
// of two runs' gradients.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "train/parameters.h"

namespace tokenmill::testing {

// params.gradients() equal `expected` (laid out like it) bit for bit; a failure names the
// first parameter and element that differ. Returns how many of the gradients are non-zero,
// so that a caller can make sure the comparison is not vacuous.
inline int64_t expect_bit_identical_gradients(const ParameterBuffers& params,
                                              std::span<const float> expected) {
  const std::span<const float> got = params.gradients();
  EXPECT_EQ(got.size(), expected.size());
  int64_t non_zero = 0;
  for (const Parameter& p : params.parameters())
    for (int64_t i = p.offset; i < p.offset + p.numel && static_cast<size_t>(i) < expected.size(); ++i) {
      const auto e = static_cast<size_t>(i);
      if (std::bit_cast<uint32_t>(got[e]) != std::bit_cast<uint32_t>(expected[e])) {
        ADD_FAILURE() << p.name << "[" << i - p.offset << "]: " << got[e] << " != " << expected[e];
        return non_zero;
      }
      non_zero += got[e] != 0.0f ? 1 : 0;
    }
  return non_zero;
}

// `grads`: the analytic gradients of `params` (a copy, laid out like values()); `loss()`: the
// loss at params' current values. Returns how many tensors move the loss measurably (|finite
// difference| > 1e-3), so that a caller can make sure the check is not vacuous.
template <class Loss>
int expect_gradients_match_finite_differences(ParameterBuffers& params, std::span<const float> grads,
                                              const Loss& loss, const std::string& label) {
  std::mt19937_64 rng(5);
  int measurable = 0;
  for (const Parameter& p : params.parameters()) {
    std::vector<float> dir(static_cast<size_t>(p.numel));
    double analytic = 0.0;
    for (int64_t i = 0; i < p.numel; ++i) {
      dir[static_cast<size_t>(i)] = (rng() & 1) != 0 ? 1.0f : -1.0f;
      analytic += dir[static_cast<size_t>(i)] * grads[static_cast<size_t>(p.offset + i)];
    }
    const double h = 1e-2 / std::sqrt(static_cast<double>(p.numel));
    const auto values = params.values().subspan(static_cast<size_t>(p.offset), static_cast<size_t>(p.numel));
    const auto loss_at = [&](double step) {
      const std::vector<float> saved(values.begin(), values.end());
      for (size_t i = 0; i < values.size(); ++i) values[i] += static_cast<float>(step * dir[i]);
      const double result = loss();
      std::copy(saved.begin(), saved.end(), values.begin());
      return result;
    };
    const double numeric = (loss_at(h) - loss_at(-h)) / (2 * h);
    EXPECT_NEAR(analytic, numeric, 3e-3 + 3e-2 * std::fabs(numeric)) << label << " " << p.name;
    measurable += std::fabs(numeric) > 1e-3 ? 1 : 0;
  }
  return measurable;
}

}  // namespace tokenmill::testing
