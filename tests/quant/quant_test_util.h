// Helpers shared by the quant tests: deterministic random rows, whole-row (de)quantisation
// into vectors, the lists of dtypes and readable parameterised test names.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "quant/quant_formats.h"
#include "quant/quant_reference.h"

namespace tokenmill::quant::testing {

inline constexpr DType kAllTypes[] = {DType::F32,  DType::BF16, DType::F16,  DType::Q4_0,  DType::Q4_1,
                                      DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::MXFP4, DType::Q4_K,
                                      DType::Q5_K, DType::Q6_K, DType::Q8_1, DType::Q8_K};
inline constexpr DType kWeightTypes[] = {DType::F32,   DType::BF16, DType::F16,  DType::Q4_0,
                                         DType::Q4_1,  DType::Q5_0, DType::Q5_1, DType::Q8_0,
                                         DType::MXFP4, DType::Q4_K, DType::Q5_K, DType::Q6_K};

// N(0, scale^2) values from mt19937 and an explicit Box-Muller transform, so the rows are the
// same with every standard library (std::normal_distribution is implementation-defined).
inline std::vector<float> gaussian(uint32_t seed, int64_t n, double scale = 1.0) {
  std::mt19937 rng(seed);
  const double two_pi = 6.283185307179586;
  std::vector<float> out(static_cast<size_t>(n));
  for (float& v : out) {
    const double u1 = (static_cast<double>(rng()) + 1.0) / 4294967296.0;  // (0, 1]
    const double u2 = static_cast<double>(rng()) / 4294967296.0;
    v = static_cast<float>(scale * std::sqrt(-2.0 * std::log(u1)) * std::cos(two_pi * u2));
  }
  return out;
}

inline std::vector<unsigned char> quantized(DType type, const std::vector<float>& x) {
  std::vector<unsigned char> q(dtype_row_bytes(type, static_cast<int64_t>(x.size())));
  quantize_row(type, x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

inline std::vector<float> dequantized(DType type, const std::vector<unsigned char>& q, int64_t k) {
  std::vector<float> y(static_cast<size_t>(k));
  dequantize_row(type, q.data(), y.data(), k);
  return y;
}

// sqrt(mean((a - b)^2)) / sqrt(mean(a^2)).
inline double relative_rms_error(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    err += d * d;
    ref += static_cast<double>(a[i]) * static_cast<double>(a[i]);
  }
  return std::sqrt(err / ref);
}

// The index of the first element whose bits differ, or -1.
inline int64_t first_bit_difference(const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (f32_to_bits(a[i]) != f32_to_bits(b[i])) return i;
  return -1;
}

// For INSTANTIATE_TEST_SUITE_P: "q4_k" etc.
struct DTypeName {
  std::string operator()(const ::testing::TestParamInfo<DType>& info) const {
    return std::string(dtype_name(info.param));
  }
};

}  // namespace tokenmill::quant::testing
