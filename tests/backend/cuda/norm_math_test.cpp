// The norms' math of the CUDA kernels (norm_math.h), run on the CPU: each row is computed as
// the kernels compose it (row sums, then the per-row scale, then the per-element step; the
// parameter gradients as sums of norm_dweight_term) and compared with the float64 reference
// at the conformance tolerance (1e-5 of the output's largest magnitude), on odd widths, with
// bf16 weights, a large mean, and d = 1 (where dx is pure cancellation).
#include "backend/cuda/norm_math.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/conformance_harness.h"
#include "backend/reference/reference_backward.h"
#include "backend/reference/reference_ops.h"

namespace tokenmill::cuda {
namespace {

using testing::close_to_reference;

constexpr double kF32 = 1e-5;
constexpr float kEps = 1e-5f;

// A host tensor of random values of random sign with magnitudes in [lo, hi] (plus `offset`),
// stored in `dtype`.
class HostTensor {
 public:
  HostTensor(DType dtype, int64_t rows, int64_t d, std::mt19937_64& rng, float lo = 0.05f, float hi = 1.0f,
             float offset = 0.0f)
      : bytes_(static_cast<size_t>(rows * d) * dtype_size(dtype)), tensor_(bytes_.data(), dtype, {rows, d}) {
    std::uniform_real_distribution<float> magnitude(lo, hi);
    std::bernoulli_distribution negative(0.5);
    for (int64_t i = 0; i < rows * d; ++i)
      store_from_f32(bytes_.data(), dtype, static_cast<size_t>(i),
                     offset + (negative(rng) ? -magnitude(rng) : magnitude(rng)));
  }
  // Element i as stored (what a kernel reads through to_float).
  float at(int64_t i) const { return load_as_f32(bytes_.data(), tensor_.dtype, static_cast<size_t>(i)); }
  const Tensor& tensor() const { return tensor_; }
  Tensor vector() const { return tensor_.reshaped({tensor_.numel()}); }

 private:
  std::vector<uint8_t> bytes_;
  Tensor tensor_;
};

std::vector<float> rms_norm_rows(const HostTensor& x, const HostTensor& w, int64_t rows, int64_t d) {
  std::vector<float> y(static_cast<size_t>(rows * d));
  for (int64_t r = 0; r < rows; ++r) {
    float sum_squares = 0.0f;
    for (int64_t i = 0; i < d; ++i) sum_squares += x.at(r * d + i) * x.at(r * d + i);
    const float scale = norm_scale(sum_squares, d, kEps);
    for (int64_t i = 0; i < d; ++i)
      y[static_cast<size_t>(r * d + i)] = rms_norm_element(x.at(r * d + i), scale, w.at(i));
  }
  return y;
}

std::vector<float> layer_norm_rows(const HostTensor& x, const HostTensor& w, const HostTensor& b,
                                   int64_t rows, int64_t d) {
  std::vector<float> y(static_cast<size_t>(rows * d));
  for (int64_t r = 0; r < rows; ++r) {
    float sum = 0.0f;
    for (int64_t i = 0; i < d; ++i) sum += x.at(r * d + i);
    const float mean = sum / static_cast<float>(d);
    float sum_squares = 0.0f;
    for (int64_t i = 0; i < d; ++i) sum_squares += (x.at(r * d + i) - mean) * (x.at(r * d + i) - mean);
    const float scale = norm_scale(sum_squares, d, kEps);
    for (int64_t i = 0; i < d; ++i)
      y[static_cast<size_t>(r * d + i)] = layer_norm_element(x.at(r * d + i), mean, scale, w.at(i), b.at(i));
  }
  return y;
}

struct Grads {
  std::vector<float> dx, dweight, dbias;
};

Grads rms_norm_backward_rows(const HostTensor& x, const HostTensor& w, const HostTensor& dy, int64_t rows,
                             int64_t d) {
  Grads g{std::vector<float>(static_cast<size_t>(rows * d)), {}, {}};
  std::vector<double> dweight(static_cast<size_t>(d), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double sum_squares = 0, sum_gx = 0;
    for (int64_t i = 0; i < d; ++i) {
      const float xi = x.at(r * d + i);
      sum_squares += static_cast<double>(xi) * xi;
      sum_gx += static_cast<double>(w.at(i)) * dy.at(r * d + i) * xi;
    }
    const RmsNormBackwardRow row = rms_norm_backward_row(sum_squares, sum_gx, d, kEps);
    for (int64_t i = 0; i < d; ++i) {
      g.dx[static_cast<size_t>(r * d + i)] = norm_dx(x.at(r * d + i), w.at(i), dy.at(r * d + i), row);
      dweight[static_cast<size_t>(i)] +=
          norm_dweight_term(x.at(r * d + i), dy.at(r * d + i), row.mean, row.r);
    }
  }
  g.dweight.assign(dweight.begin(), dweight.end());
  return g;
}

Grads layer_norm_backward_rows(const HostTensor& x, const HostTensor& w, const HostTensor& dy, int64_t rows,
                               int64_t d) {
  Grads g{std::vector<float>(static_cast<size_t>(rows * d)), {}, {}};
  std::vector<double> dweight(static_cast<size_t>(d), 0.0), dbias(static_cast<size_t>(d), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t i = 0; i < d; ++i) sum += x.at(r * d + i);
    const double mean = sum / static_cast<double>(d);
    double sum_centered_squares = 0, sum_g = 0, sum_g_centered = 0;
    for (int64_t i = 0; i < d; ++i) {
      const double centered = x.at(r * d + i) - mean, gi = static_cast<double>(w.at(i)) * dy.at(r * d + i);
      sum_centered_squares += centered * centered;
      sum_g += gi;
      sum_g_centered += gi * centered;
    }
    const LayerNormBackwardRow row =
        layer_norm_backward_row(mean, sum_centered_squares, sum_g, sum_g_centered, d, kEps);
    for (int64_t i = 0; i < d; ++i) {
      g.dx[static_cast<size_t>(r * d + i)] = norm_dx(x.at(r * d + i), w.at(i), dy.at(r * d + i), row);
      dweight[static_cast<size_t>(i)] += norm_dweight_term(x.at(r * d + i), dy.at(r * d + i), mean, row.r);
      dbias[static_cast<size_t>(i)] += dy.at(r * d + i);
    }
  }
  g.dweight.assign(dweight.begin(), dweight.end());
  g.dbias.assign(dbias.begin(), dbias.end());
  return g;
}

TEST(NormMath, RmsNormMatchesReference) {
  std::mt19937_64 rng(21);
  for (const DType wdtype : {DType::F32, DType::BF16, DType::F16}) {
    for (const int64_t d : {1, 7, 64, 80, 4099}) {
      const int64_t rows = 5;
      SCOPED_TRACE(std::string(dtype_name(wdtype)) + " d=" + std::to_string(d));
      const HostTensor x(DType::F32, rows, d, rng, 0.05f, 4.0f);
      const HostTensor w(wdtype, 1, d, rng, 0.5f, 2.0f);
      EXPECT_TRUE(close_to_reference(rms_norm_rows(x, w, rows, d),
                                     reference::rms_norm(x.tensor(), w.vector(), kEps), kF32));
    }
  }
}

TEST(NormMath, LayerNormMatchesReferenceWithLargeMean) {
  std::mt19937_64 rng(22);
  for (const int64_t d : {1, 7, 64, 768, 1001}) {
    const int64_t rows = 3;
    SCOPED_TRACE("d=" + std::to_string(d));
    const HostTensor x(DType::F32, rows, d, rng, 0.05f, 1.0f, 3.0f);
    const HostTensor w(DType::F32, 1, d, rng, 0.5f, 2.0f);
    const HostTensor b(DType::BF16, 1, d, rng);
    EXPECT_TRUE(close_to_reference(layer_norm_rows(x, w, b, rows, d),
                                   reference::layer_norm(x.tensor(), w.vector(), b.vector(), kEps), kF32));
  }
}

TEST(NormMath, RmsNormBackwardMatchesReference) {
  std::mt19937_64 rng(23);
  for (const DType wdtype : {DType::F32, DType::BF16}) {
    for (const int64_t d : {1, 7, 37, 768, 1001}) {
      for (const int64_t rows : {1, 13}) {
        SCOPED_TRACE(std::string(dtype_name(wdtype)) + " d=" + std::to_string(d) +
                     " rows=" + std::to_string(rows));
        const HostTensor x(DType::F32, rows, d, rng, 0.05f, 4.0f);
        const HostTensor w(wdtype, 1, d, rng, 0.5f, 2.0f);
        const HostTensor dy(DType::F32, rows, d, rng);
        const Grads got = rms_norm_backward_rows(x, w, dy, rows, d);
        const auto want = reference::rms_norm_backward(x.tensor(), w.vector(), kEps, dy.tensor());
        EXPECT_TRUE(close_to_reference(got.dx, want.dx, kF32));
        EXPECT_TRUE(close_to_reference(got.dweight, want.dweight, kF32));
      }
    }
  }
}

TEST(NormMath, LayerNormBackwardMatchesReferenceWithLargeMean) {
  std::mt19937_64 rng(24);
  for (const int64_t d : {1, 7, 37, 768, 1001}) {
    for (const int64_t rows : {1, 13}) {
      SCOPED_TRACE("d=" + std::to_string(d) + " rows=" + std::to_string(rows));
      const HostTensor x(DType::F32, rows, d, rng, 0.05f, 1.0f, 3.0f);
      const HostTensor w(DType::F32, 1, d, rng, 0.5f, 2.0f);
      const HostTensor dy(DType::F32, rows, d, rng);
      const Grads got = layer_norm_backward_rows(x, w, dy, rows, d);
      const auto want = reference::layer_norm_backward(x.tensor(), w.vector(), kEps, dy.tensor());
      EXPECT_TRUE(close_to_reference(got.dx, want.dx, kF32));
      EXPECT_TRUE(close_to_reference(got.dweight, want.dweight, kF32));
      EXPECT_TRUE(close_to_reference(got.dbias, want.dbias, kF32));
    }
  }
}

}  // namespace
}  // namespace tokenmill::cuda
