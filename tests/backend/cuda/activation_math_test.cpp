// The activations' per-element math of the CUDA kernels (activation_math.h), run on the CPU
// against the float64 reference, with the conformance suite's tolerance (1e-5 of the
// output's largest magnitude) over the ranges it tests, and per-element relative accuracy
// where the output is tiny or saturated.
#include "backend/cuda/activation_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/conformance_harness.h"
#include "backend/reference/reference_backward.h"
#include "backend/reference/reference_ops.h"

namespace tokenmill::cuda {
namespace {

using testing::close_to_reference;

constexpr double kF32 = 1e-5;

// `count` values of random sign with magnitudes in [lo, hi] (never zero), as the conformance
// suite draws them.
std::vector<float> random_values(int64_t count, float lo, float hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> magnitude(lo, hi);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = negative(rng) ? -magnitude(rng) : magnitude(rng);
  return v;
}

Tensor view(std::vector<float>& v) { return Tensor(v.data(), DType::F32, {static_cast<int64_t>(v.size())}); }

template <class F>
std::vector<float> map(const std::vector<float>& x, F f) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = f(x[i]);
  return y;
}

TEST(ActivationMath, GeluBothFormsMatchReference) {
  for (const bool tanh_form : {true, false}) {
    SCOPED_TRACE(tanh_form ? "tanh" : "erf");
    const GeluForm form = tanh_form ? GeluForm::Tanh : GeluForm::Erf;
    std::vector<float> x = random_values(20000, 0.01f, 8.0f, 1);
    EXPECT_TRUE(close_to_reference(map(x, [&](float v) { return gelu(v, tanh_form); }),
                                   reference::gelu(view(x), form), kF32));
  }
}

TEST(ActivationMath, GeluIsAccurateForSmallAndLargeArguments) {
  // The conformance suite's per-element bound: |got - want| <= 1e-6 |x|.
  std::vector<float> x = {1e-6f, -1e-6f, 1e-3f, -1e-3f, -3.0f, 12.0f, -12.0f, 100.0f, -100.0f};
  for (const bool tanh_form : {true, false}) {
    const auto want = reference::gelu(view(x), tanh_form ? GeluForm::Tanh : GeluForm::Erf);
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_NEAR(gelu(x[i], tanh_form), want[i], 1e-6 * std::abs(x[i]))
          << (tanh_form ? "tanh " : "erf ") << x[i];
  }
}

TEST(ActivationMath, GeluDerivativesMatchReference) {
  for (const bool tanh_form : {true, false}) {
    SCOPED_TRACE(tanh_form ? "tanh" : "erf");
    std::vector<float> x = random_values(20000, 0.01f, 8.0f, 2);
    std::vector<float> dy = random_values(20000, 0.05f, 1.0f, 3);
    std::vector<float> got(x.size());
    for (size_t i = 0; i < x.size(); ++i) got[i] = dy[i] * gelu_derivative(x[i], tanh_form);
    EXPECT_TRUE(close_to_reference(
        got, reference::gelu_backward(view(x), tanh_form ? GeluForm::Tanh : GeluForm::Erf, view(dy)), kF32));
  }
}

TEST(ActivationMath, GeluDerivativesSaturate) {
  for (const bool tanh_form : {true, false}) {
    EXPECT_EQ(gelu_derivative(100.0f, tanh_form), 1.0f);
    EXPECT_EQ(gelu_derivative(-100.0f, tanh_form), 0.0f);
    EXPECT_NEAR(gelu_derivative(0.0f, tanh_form), 0.5f, 1e-7f);
  }
}

TEST(ActivationMath, SiluAndSwigluMatchReference) {
  std::vector<float> gate = random_values(20000, 0.01f, 12.0f, 4);
  std::vector<float> up = random_values(20000, 0.05f, 1.0f, 5);
  EXPECT_TRUE(close_to_reference(map(gate, silu), reference::silu(view(gate)), kF32));
  std::vector<float> y(gate.size());
  for (size_t i = 0; i < gate.size(); ++i) y[i] = swiglu(gate[i], up[i]);
  EXPECT_TRUE(close_to_reference(y, reference::swiglu(view(gate), view(up)), kF32));
  // Saturation: silu(x) -> x and -> -0 without overflow to NaN.
  EXPECT_EQ(silu(100.0f), 100.0f);
  EXPECT_EQ(silu(-100.0f), 0.0f);
  EXPECT_EQ(silu(-1000.0f), 0.0f);
}

TEST(ActivationMath, GatedGradsMatchReference) {
  std::vector<float> gate = random_values(20000, 0.01f, 12.0f, 6);
  std::vector<float> up = random_values(20000, 0.05f, 1.0f, 7);
  std::vector<float> dy = random_values(20000, 0.05f, 1.0f, 8);
  for (const bool geglu : {false, true}) {
    SCOPED_TRACE(geglu ? "geglu" : "swiglu");
    std::vector<float> dgate(gate.size()), dup(gate.size());
    for (size_t i = 0; i < gate.size(); ++i) {
      const SwigluGrads g = geglu ? geglu_grads(gate[i], up[i], dy[i]) : swiglu_grads(gate[i], up[i], dy[i]);
      dgate[i] = g.dgate;
      dup[i] = g.dup;
    }
    const auto want = geglu ? reference::geglu_backward(view(gate), view(up), view(dy))
                            : reference::swiglu_backward(view(gate), view(up), view(dy));
    EXPECT_TRUE(close_to_reference(dgate, want.dgate, kF32));
    EXPECT_TRUE(close_to_reference(dup, want.dup, kF32));
  }
  const SwigluGrads far = swiglu_grads(-1000.0f, 1.0f, 1.0f);  // e^1000 = inf: s = 0, no NaN
  EXPECT_EQ(far.dgate, 0.0f);
  EXPECT_EQ(far.dup, 0.0f);
}

TEST(ActivationMath, SoftcapGradientMatchesReferenceNearSaturation) {
  const float cap = 5.0f;
  std::vector<float> x = random_values(20000, 0.01f, 30.0f, 9);
  std::vector<float> dy = random_values(20000, 0.05f, 1.0f, 10);
  std::vector<float> y(x.size()), dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = cap * tanhf(x[i] / cap);
  for (size_t i = 0; i < x.size(); ++i) dx[i] = softcap_gradient(y[i], cap, dy[i]);
  // Elementwise relative: the gradient of a saturated score is tiny and must keep its digits.
  const auto want = reference::softcap_backward(view(y), cap, view(dy));
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_NEAR(dx[i], want[i], 4e-7 * std::abs(want[i]) + 1e-30) << "y = " << y[i];
}

}  // namespace
}  // namespace tokenmill::cuda
