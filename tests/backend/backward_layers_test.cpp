// Backward of the layer ops (Backend's "training" section): RMSNorm, LayerNorm, GELU,
// SwiGLU, GeGLU, soft-capping, RoPE and causal GQA attention (with sliding windows and soft caps).
//
//  1. The float64 reference (reference_backward.h) against fourth-order central finite
//     differences of the forward reference (reference_ops.h) of the scalar sum(dy * f(x)):
//     this proves the reference is the gradient. Inputs are multiples of 2^-10 so that
//     every perturbed input is an exact f32 value; the difference error is ~h^4 ~ 1e-10,
//     so kFiniteDifference = 1e-6 relative (the numeric gradient is rounded to f32).
//  2. Every backend against that reference on seeded random non-zero inputs of odd sizes:
//     canary bytes around every output, inputs unchanged, activation gradients starting as
//     NaN (they must be overwritten), parameter gradients starting non-zero (they must end
//     at start + gradient), the in-place variants the contract allows. Tolerance kF32 =
//     1e-5 of the output's largest magnitude, as in conformance_test.cpp.
//  3. The ops whose contract says so (the norms' parameter gradients, attention's dk/dv
//     summed over a group) give identical bits for any thread count.
//  4. Shape mismatches, overlaps and wrong dtypes throw Error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/reference/reference_backward.h"
#include "backend/reference/reference_ops.h"
#include "conformance_harness.h"
#include "core/error.h"
#include "core/parallel.h"

namespace tokenmill::testing {
namespace {

constexpr double kFiniteDifference = 1e-6;
constexpr double kF32 = 1e-5;

// ---------------------------------------------------------------- finite differences

// A host f32 tensor for the finite-difference tests.
class HostTensor {
 public:
  // Random non-zero multiples of 2^-10 with magnitudes in [lo, hi] (far below 2^13), so x +- h and
  // x +- 2h stay exact f32 values for the step h = 2^-8.
  HostTensor(std::initializer_list<int64_t> dims, std::mt19937_64& rng, float lo = 0.05f, float hi = 1.0f)
      : tensor_(nullptr, DType::F32, dims), values_(static_cast<size_t>(tensor_.numel())) {
    std::uniform_real_distribution<float> magnitude(lo, hi);
    std::bernoulli_distribution negative(0.5);
    for (float& v : values_) v = std::round(magnitude(rng) * 1024) / 1024 * (negative(rng) ? -1.0f : 1.0f);
    tensor_.data = values_.data();
  }
  HostTensor(std::initializer_list<int64_t> dims, std::vector<float> values)
      : tensor_(nullptr, DType::F32, dims), values_(std::move(values)) {
    tensor_.data = values_.data();
  }
  HostTensor(const HostTensor&) = delete;
  HostTensor& operator=(const HostTensor&) = delete;

  const Tensor& tensor() const { return tensor_; }
  size_t size() const { return values_.size(); }
  float& operator[](size_t i) { return values_[i]; }
  float operator[](size_t i) const { return values_[i]; }

 private:
  Tensor tensor_;
  std::vector<float> values_;
};

// d/dx_i of L = sum_j dy_j forward()_j for every element of x, by the fourth-order central
// difference (8 (L(x + h) - L(x - h)) - (L(x + 2h) - L(x - 2h))) / 12h; forward reads x
// through its tensor.
std::vector<float> numeric_gradient(HostTensor& x, const HostTensor& dy,
                                    const std::function<std::vector<double>()>& forward) {
  constexpr float h = 1.0f / 256;
  const auto loss = [&] {
    const std::vector<double> y = forward();
    EXPECT_EQ(y.size(), dy.size());
    double sum = 0;
    for (size_t j = 0; j < y.size() && j < dy.size(); ++j) sum += dy[j] * y[j];
    return sum;
  };
  std::vector<float> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float x0 = x[i];
    double l[4];
    const float steps[4] = {-2, -1, 1, 2};
    for (int s = 0; s < 4; ++s) {
      x[i] = x0 + steps[s] * h;
      l[s] = loss();
    }
    x[i] = x0;
    grad[i] = static_cast<float>((8 * (l[2] - l[1]) - (l[3] - l[0])) / (12.0 * h));
  }
  return grad;
}

class ReferenceGradient : public ::testing::Test {
 protected:
  std::mt19937_64 rng_{20261203};
};

TEST_F(ReferenceGradient, RmsNorm) {
  HostTensor x({3, 37}, rng_), weight({37}, rng_, 0.5f, 2.0f), dy({3, 37}, rng_);
  const float eps = 1e-5f;
  const auto grads = reference::rms_norm_backward(x.tensor(), weight.tensor(), eps, dy.tensor());
  const auto forward = [&] { return reference::rms_norm(x.tensor(), weight.tensor(), eps); };
  EXPECT_TRUE(close_to_reference(numeric_gradient(x, dy, forward), grads.dx, kFiniteDifference));
  EXPECT_TRUE(close_to_reference(numeric_gradient(weight, dy, forward), grads.dweight, kFiniteDifference));
  EXPECT_TRUE(grads.dbias.empty());
}

TEST_F(ReferenceGradient, LayerNorm) {
  HostTensor x({3, 37}, rng_), weight({37}, rng_, 0.5f, 2.0f), bias({37}, rng_), dy({3, 37}, rng_);
  for (size_t i = 0; i < x.size(); ++i) x[i] += 2.0f;  // mean far from 0
  const float eps = 1e-5f;
  const auto grads = reference::layer_norm_backward(x.tensor(), weight.tensor(), eps, dy.tensor());
  const auto forward = [&] { return reference::layer_norm(x.tensor(), weight.tensor(), bias.tensor(), eps); };
  EXPECT_TRUE(close_to_reference(numeric_gradient(x, dy, forward), grads.dx, kFiniteDifference));
  EXPECT_TRUE(close_to_reference(numeric_gradient(weight, dy, forward), grads.dweight, kFiniteDifference));
  EXPECT_TRUE(close_to_reference(numeric_gradient(bias, dy, forward), grads.dbias, kFiniteDifference));
}

TEST_F(ReferenceGradient, GeluBothForms) {
  for (const GeluForm form : {GeluForm::Tanh, GeluForm::Erf}) {
    SCOPED_TRACE(form == GeluForm::Tanh ? "tanh" : "erf");
    HostTensor x({37}, rng_, 0.05f, 3.9f), dy({37}, rng_);
    const auto forward = [&] { return reference::gelu(x.tensor(), form); };
    EXPECT_TRUE(close_to_reference(numeric_gradient(x, dy, forward),
                                   reference::gelu_backward(x.tensor(), form, dy.tensor()),
                                   kFiniteDifference));
  }
}

// The gated units (y = act(gate) * up), their forward and backward references and Backend ops.
struct GatedUnit {
  const char* name;
  std::vector<double> (*forward)(const Tensor& gate, const Tensor& up);
  reference::GatedGrads (*backward)(const Tensor& gate, const Tensor& up, const Tensor& dy);
  void (Backend::*op)(const Tensor& gate, const Tensor& up, const Tensor& dy, const Tensor& dgate,
                      const Tensor& dup);
};
const GatedUnit kGatedUnits[] = {
    {"swiglu", &reference::swiglu, &reference::swiglu_backward, &Backend::swiglu_backward},
    {"geglu", &reference::geglu, &reference::geglu_backward, &Backend::geglu_backward}};

TEST_F(ReferenceGradient, GatedUnits) {
  for (const GatedUnit& unit : kGatedUnits) {
    SCOPED_TRACE(unit.name);
    HostTensor gate({37}, rng_, 0.05f, 3.9f), up({37}, rng_), dy({37}, rng_);
    const auto grads = unit.backward(gate.tensor(), up.tensor(), dy.tensor());
    const auto forward = [&] { return unit.forward(gate.tensor(), up.tensor()); };
    EXPECT_TRUE(close_to_reference(numeric_gradient(gate, dy, forward), grads.dgate, kFiniteDifference));
    EXPECT_TRUE(close_to_reference(numeric_gradient(up, dy, forward), grads.dup, kFiniteDifference));
  }
}

TEST_F(ReferenceGradient, SoftcapFromItsOutput) {
  HostTensor x({37}, rng_, 0.05f, 30.0f), dy({37}, rng_);
  const float cap = 8.0f;  // x up to ~4 caps: tanh well into saturation
  const std::vector<double> capped = reference::softcap(x.tensor(), cap);
  std::vector<float> y_values(capped.begin(), capped.end());
  HostTensor y({37}, std::move(y_values));
  const auto forward = [&] { return reference::softcap(x.tensor(), cap); };
  // The f32 rounding of y moves 1 - (y / cap)^2 by ~1e-7 relative to it, near saturation more.
  EXPECT_TRUE(close_to_reference(numeric_gradient(x, dy, forward),
                                 reference::softcap_backward(y.tensor(), cap, dy.tensor()), 1e-5));
}

// inv_freq [rotary_dim / 2] of base 10000, as Llama's.
std::vector<float> rope_frequencies(int64_t rotary_dim) {
  std::vector<float> freq(static_cast<size_t>(rotary_dim / 2));
  for (size_t j = 0; j < freq.size(); ++j)
    freq[j] = static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(j) / rotary_dim));
  return freq;
}

TEST_F(ReferenceGradient, RopeBothLayoutsWithPartialRotation) {
  for (const RopeLayout layout : {RopeLayout::Neox, RopeLayout::Interleaved}) {
    SCOPED_TRACE(layout == RopeLayout::Neox ? "neox" : "interleaved");
    HostTensor x({3, 2, 10}, rng_), dy({3, 2, 10}, rng_), freq({3}, rope_frequencies(6));
    const std::vector<int32_t> positions = {0, 7, 1000};
    const float magnitude = 1.25f;  // a YaRN or LongRoPE attention factor
    const auto forward = [&] {
      return reference::rope(x.tensor(), positions, freq.tensor(), layout, magnitude);
    };
    EXPECT_TRUE(
        close_to_reference(numeric_gradient(x, dy, forward),
                           reference::rope_backward(dy.tensor(), positions, freq.tensor(), layout, magnitude),
                           kFiniteDifference));
  }
}

TEST_F(ReferenceGradient, AttentionWithGroupedHeadsWindowsAndSoftCaps) {
  const struct {
    int64_t kv_heads, window;
    float softcap;
  } cases[] = {{2, 0, 0}, {3, 0, 0}, {6, 0, 0}, {2, 4, 0}, {3, 0, 1.5f}, {2, 5, 2.0f}};
  for (const auto& c : cases) {
    const int64_t kv_heads = c.kv_heads;
    SCOPED_TRACE("kv_heads=" + std::to_string(kv_heads) + " window=" + std::to_string(c.window) +
                 " softcap=" + std::to_string(c.softcap));
    const int64_t n = 13, heads = 6, hd = 10;
    HostTensor q({n, heads, hd}, rng_), k({n, kv_heads, hd}, rng_), v({n, kv_heads, hd}, rng_),
        dout({n, heads, hd}, rng_);
    const AttentionScores scores(0.7f, c.window, c.softcap);
    const auto grads =
        reference::attention_backward(q.tensor(), k.tensor(), v.tensor(), dout.tensor(), scores);
    const auto forward = [&] { return reference::attention(q.tensor(), k.tensor(), v.tensor(), 0, scores); };
    EXPECT_TRUE(close_to_reference(numeric_gradient(q, dout, forward), grads.dq, kFiniteDifference));
    EXPECT_TRUE(close_to_reference(numeric_gradient(k, dout, forward), grads.dk, kFiniteDifference));
    EXPECT_TRUE(close_to_reference(numeric_gradient(v, dout, forward), grads.dv, kFiniteDifference));
  }
}

// ---------------------------------------------------------------- backends vs the reference

class BackwardLayers : public BackendOpTest {
 protected:
  BackwardLayers() : BackendOpTest(20261204) {}

  // RoPE's inv_freq for `rotary_dim` at an unaligned address, snapshotted.
  std::unique_ptr<GuardedBuffer> frequencies(int64_t rotary_dim) {
    auto b = buffer(DType::F32, {rotary_dim / 2}, 4);
    const std::vector<float> freq = rope_frequencies(rotary_dim);
    for (size_t j = 0; j < freq.size(); ++j) b->set(static_cast<int64_t>(j), freq[j]);
    b->snapshot();
    return b;
  }
  // A parameter gradient: starts random and non-zero (the op adds to it).
  std::unique_ptr<GuardedBuffer> accumulated(std::initializer_list<int64_t> dims) {
    auto b = buffer(dims);
    b->fill_random(rng_);
    return b;
  }
};

// start + gradient: what an accumulated parameter gradient must hold after the op.
std::vector<double> plus(const std::vector<float>& start, const std::vector<double>& gradient) {
  std::vector<double> sum(gradient);
  for (size_t i = 0; i < sum.size() && i < start.size(); ++i) sum[i] += start[i];
  return sum;
}

// ---------------------------------------------------------------- norms

TEST_P(BackwardLayers, RmsNormMatchesReference) {
  for (const DType wdtype : {DType::F32, DType::BF16}) {
    for (const int64_t d : {1, 7, 37, 768, 1001}) {
      for (const int64_t rows : {1, 13, 100}) {
        SCOPED_TRACE(std::string(dtype_name(wdtype)) + " d=" + std::to_string(d) +
                     " rows=" + std::to_string(rows));
        auto x = input({rows, d}, 0.05f, 4.0f);
        auto weight = input(wdtype, {d}, 0.5f, 2.0f);
        auto dy = input({rows, d});
        auto dx = output({rows, d});
        auto dweight = accumulated({d});
        const auto start = dweight->values();
        backend_->rms_norm_backward(x->tensor(), weight->tensor(), 1e-5f, dy->tensor(), dx->tensor(),
                                    dweight->tensor(), GradWrite::Overwrite);
        const auto want = reference::rms_norm_backward(x->tensor(), weight->tensor(), 1e-5f, dy->tensor());
        EXPECT_TRUE(close_to_reference(dx->values(), want.dx, kF32));
        EXPECT_TRUE(close_to_reference(dweight->values(), plus(start, want.dweight), kF32));
        EXPECT_GUARDS(dx);
        EXPECT_GUARDS(dweight);
        EXPECT_UNCHANGED(x);
        EXPECT_UNCHANGED(weight);
        EXPECT_UNCHANGED(dy);
      }
    }
  }
}

TEST_P(BackwardLayers, LayerNormMatchesReferenceWithLargeMean) {
  for (const int64_t d : {1, 7, 37, 768, 1001}) {
    for (const int64_t rows : {1, 13, 100}) {
      SCOPED_TRACE("d=" + std::to_string(d) + " rows=" + std::to_string(rows));
      auto x = input({rows, d});
      for (int64_t i = 0; i < x->numel(); ++i) x->set(i, x->get(i) + 3.0f);
      x->snapshot();
      auto weight = input({d}, 0.5f, 2.0f);
      auto dy = input({rows, d});
      auto dx = output({rows, d});
      auto dweight = accumulated({d});
      auto dbias = accumulated({d});
      const auto start_w = dweight->values(), start_b = dbias->values();
      backend_->layer_norm_backward(x->tensor(), weight->tensor(), 1e-5f, dy->tensor(), dx->tensor(),
                                    dweight->tensor(), dbias->tensor(), GradWrite::Overwrite);
      const auto want = reference::layer_norm_backward(x->tensor(), weight->tensor(), 1e-5f, dy->tensor());
      EXPECT_TRUE(close_to_reference(dx->values(), want.dx, kF32));
      EXPECT_TRUE(close_to_reference(dweight->values(), plus(start_w, want.dweight), kF32));
      EXPECT_TRUE(close_to_reference(dbias->values(), plus(start_b, want.dbias), kF32));
      EXPECT_GUARDS(dx);
      EXPECT_GUARDS(dweight);
      EXPECT_GUARDS(dbias);
      EXPECT_UNCHANGED(x);
      EXPECT_UNCHANGED(weight);
      EXPECT_UNCHANGED(dy);
    }
  }
}

TEST_P(BackwardLayers, NormParameterGradientsAreBitwiseIndependentOfThreadCount) {
  const int64_t rows = 999, d = 130;  // 32 row blocks, reduced by several threads
  auto x = input({rows, d});
  auto weight = input({d});
  auto dy = input({rows, d});
  std::vector<std::vector<float>> first;
  for (const int threads : {1, 2, 3, 5}) {
    set_thread_count(threads);
    auto dx_rms = output({rows, d});
    auto dx_ln = output({rows, d});
    auto dweight_rms = buffer({d});
    auto dweight_ln = buffer({d});
    auto dbias_ln = buffer({d});
    for (auto* g : {dweight_rms.get(), dweight_ln.get(), dbias_ln.get()}) g->fill(0.25f);
    backend_->rms_norm_backward(x->tensor(), weight->tensor(), 1e-6f, dy->tensor(), dx_rms->tensor(),
                                dweight_rms->tensor(), GradWrite::Overwrite);
    backend_->layer_norm_backward(x->tensor(), weight->tensor(), 1e-6f, dy->tensor(), dx_ln->tensor(),
                                  dweight_ln->tensor(), dbias_ln->tensor(), GradWrite::Overwrite);
    const std::vector<std::vector<float>> got = {dx_rms->values(), dweight_rms->values(), dx_ln->values(),
                                                 dweight_ln->values(), dbias_ln->values()};
    if (first.empty()) first = got;
    EXPECT_EQ(got, first) << threads << " threads";
  }
}

// GradWrite::Accumulate: dx += the gradient, bit for bit as add() of the overwritten one, with
// the same parameter gradients.
TEST_P(BackwardLayers, NormBackwardAccumulatesIntoDxAsAddDoes) {
  for (const bool layer : {false, true}) {
    for (const int64_t d : {1, 37, 1001}) {
      SCOPED_TRACE(std::string(layer ? "layer" : "rms") + " d=" + std::to_string(d));
      const int64_t rows = 100;
      auto x = input({rows, d}, 0.05f, 4.0f);
      auto weight = input({d}, 0.5f, 2.0f);
      auto dy = input({rows, d});
      auto residual = input({rows, d});
      const auto backward = [&](const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                                GradWrite write) {
        if (layer)
          return backend_->layer_norm_backward(x->tensor(), weight->tensor(), 1e-5f, dy->tensor(), dx,
                                               dweight, dbias, write);
        backend_->rms_norm_backward(x->tensor(), weight->tensor(), 1e-5f, dy->tensor(), dx, dweight, write);
      };
      auto g = output({rows, d});
      auto want_dx = output({rows, d});
      auto want_dw = buffer({d});
      auto want_db = buffer({d});
      for (auto* b : {want_dw.get(), want_db.get()}) b->fill(0.25f);
      backward(g->tensor(), want_dw->tensor(), want_db->tensor(), GradWrite::Overwrite);
      backend_->add(residual->tensor(), g->tensor(), want_dx->tensor());

      auto dx = buffer({rows, d});
      for (int64_t i = 0; i < dx->numel(); ++i) dx->set(i, residual->get(i));
      auto dw = buffer({d});
      auto db = buffer({d});
      for (auto* b : {dw.get(), db.get()}) b->fill(0.25f);
      backward(dx->tensor(), dw->tensor(), db->tensor(), GradWrite::Accumulate);
      EXPECT_EQ(dx->values(), want_dx->values());
      EXPECT_EQ(dw->values(), want_dw->values());
      EXPECT_EQ(db->values(), want_db->values());  // untouched by rms_norm_backward
      EXPECT_GUARDS(dx);
      EXPECT_UNCHANGED(x);
      EXPECT_UNCHANGED(dy);
    }
  }
}

TEST_P(BackwardLayers, NormsRejectMismatchedShapesAndOverlaps) {
  auto x = input({2, 16});
  auto w = input({16});
  auto dy = input({2, 16});
  auto dx = output({2, 16});
  auto dw = accumulated({16});
  auto db = accumulated({16});
  auto dw_short = accumulated({15});
  auto dy_wide = input({2, 17});
  auto dx_wrong = output({4, 8});
  auto dy_bf16 = input(DType::BF16, {2, 16});
  const float eps = 1e-5f;
  EXPECT_THROW(backend_->rms_norm_backward(x->tensor(), w->tensor(), eps, dy->tensor(), dx->tensor(),
                                           dw_short->tensor(), GradWrite::Overwrite),
               Error);
  EXPECT_THROW(backend_->rms_norm_backward(x->tensor(), w->tensor(), eps, dy_wide->tensor(), dx->tensor(),
                                           dw->tensor(), GradWrite::Overwrite),
               Error);
  EXPECT_THROW(backend_->rms_norm_backward(x->tensor(), w->tensor(), eps, dy->tensor(), dx_wrong->tensor(),
                                           dw->tensor(), GradWrite::Overwrite),
               Error);
  EXPECT_THROW(backend_->rms_norm_backward(x->tensor(), w->tensor(), eps, dy_bf16->tensor(), dx->tensor(),
                                           dw->tensor(), GradWrite::Overwrite),
               Error);
  EXPECT_THROW(backend_->rms_norm_backward(x->tensor(), w->tensor(), eps, dy->tensor(), dy->tensor(),
                                           dw->tensor(), GradWrite::Overwrite),
               Error);  // dx may not be dy: the contract allows no aliasing
  EXPECT_THROW(backend_->layer_norm_backward(x->tensor(), w->tensor(), eps, dy->tensor(), dx->tensor(),
                                             dw->tensor(), dw_short->tensor(), GradWrite::Overwrite),
               Error);
  EXPECT_THROW(backend_->layer_norm_backward(x->tensor(), w->tensor(), eps, dy->tensor(), dx->tensor(),
                                             dw->tensor(), dw->tensor(), GradWrite::Overwrite),
               Error);
  // dx shifted by one element into x.
  auto big = input({3, 16});
  const Tensor shifted(big->tensor().as<float>() + 1, DType::F32, {2, 16});
  EXPECT_THROW(backend_->layer_norm_backward(big->tensor().slice_rows(0, 2), w->tensor(), eps, dy->tensor(),
                                             shifted, dw->tensor(), db->tensor(), GradWrite::Overwrite),
               Error);
  EXPECT_GUARDS(dx);
  EXPECT_UNCHANGED(big);
}

// ---------------------------------------------------------------- activations

const int64_t kElementCounts[] = {1, 7, 33, 1000, 70001};

TEST_P(BackwardLayers, GeluBothFormsMatchReferenceAndWorkInPlace) {
  for (const GeluForm form : {GeluForm::Tanh, GeluForm::Erf}) {
    for (const int64_t count : kElementCounts) {
      SCOPED_TRACE(std::string(form == GeluForm::Tanh ? "tanh" : "erf") + " count=" + std::to_string(count));
      auto x = input({count}, 0.01f, 8.0f);
      auto dy = input({count});
      auto dx = output({count});
      backend_->gelu_backward(x->tensor(), form, dy->tensor(), dx->tensor());
      const auto want = reference::gelu_backward(x->tensor(), form, dy->tensor());
      EXPECT_TRUE(close_to_reference(dx->values(), want, kF32));
      EXPECT_GUARDS(dx);
      EXPECT_UNCHANGED(x);
      EXPECT_UNCHANGED(dy);
      backend_->gelu_backward(x->tensor(), form, dy->tensor(), dy->tensor());  // dx = dy
      EXPECT_TRUE(close_to_reference(dy->values(), want, kF32));
      EXPECT_GUARDS(dy);
    }
  }
}

TEST_P(BackwardLayers, GatedUnitsMatchReference) {
  for (const GatedUnit& unit : kGatedUnits) {
    for (const int64_t count : kElementCounts) {
      SCOPED_TRACE(std::string(unit.name) + " count=" + std::to_string(count));
      auto gate = input({count}, 0.01f, 12.0f);
      auto up = input({count});
      auto dy = input({count});
      auto dgate = output({count});
      auto dup = output({count});
      ((*backend_).*unit.op)(gate->tensor(), up->tensor(), dy->tensor(), dgate->tensor(), dup->tensor());
      const auto want = unit.backward(gate->tensor(), up->tensor(), dy->tensor());
      EXPECT_TRUE(close_to_reference(dgate->values(), want.dgate, kF32));
      EXPECT_TRUE(close_to_reference(dup->values(), want.dup, kF32));
      EXPECT_GUARDS(dgate);
      EXPECT_GUARDS(dup);
      EXPECT_UNCHANGED(gate);
      EXPECT_UNCHANGED(up);
      EXPECT_UNCHANGED(dy);
    }
  }
}

TEST_P(BackwardLayers, GatedUnitsWorkInPlaceOverEveryPairOfInputs) {
  // (dgate, dup) written over (a, b) of (gate, up, dy): indices 0, 1, 2.
  const int pairs[][2] = {{2, 0}, {1, 2}, {0, 1}, {2, 1}, {1, 0}, {0, 2}};
  for (const GatedUnit& unit : kGatedUnits) {
    for (const auto& pair : pairs) {
      SCOPED_TRACE(std::string(unit.name) + ": dgate over input " + std::to_string(pair[0]) +
                   ", dup over input " + std::to_string(pair[1]));
      auto gate = input({1001}, 0.01f, 8.0f);
      auto up = input({1001});
      auto dy = input({1001});
      const auto want = unit.backward(gate->tensor(), up->tensor(), dy->tensor());
      const GuardedBuffer* buffers[3] = {gate.get(), up.get(), dy.get()};
      ((*backend_).*unit.op)(gate->tensor(), up->tensor(), dy->tensor(), buffers[pair[0]]->tensor(),
                             buffers[pair[1]]->tensor());
      EXPECT_TRUE(close_to_reference(buffers[pair[0]]->values(), want.dgate, kF32));
      EXPECT_TRUE(close_to_reference(buffers[pair[1]]->values(), want.dup, kF32));
    }
  }
}

TEST_P(BackwardLayers, SoftcapMatchesReferenceInPlaceToo) {
  for (const int64_t count : kElementCounts) {
    SCOPED_TRACE("count=" + std::to_string(count));
    const float cap = 5.0f;
    auto x = input({count}, 0.01f, 20.0f);
    auto y = output({count});
    backend_->softcap(x->tensor(), cap, y->tensor());
    y->snapshot();
    auto dy = input({count});
    auto dx = output({count});
    backend_->softcap_backward(y->tensor(), cap, dy->tensor(), dx->tensor());
    const auto want = reference::softcap_backward(y->tensor(), cap, dy->tensor());
    EXPECT_TRUE(close_to_reference(dx->values(), want, kF32));
    EXPECT_GUARDS(dx);
    EXPECT_UNCHANGED(y);
    EXPECT_UNCHANGED(dy);
    backend_->softcap_backward(y->tensor(), cap, dy->tensor(), dy->tensor());  // dx = dy
    EXPECT_TRUE(close_to_reference(dy->values(), want, kF32));
    const auto want_over_y = reference::softcap_backward(y->tensor(), cap, x->tensor());
    backend_->softcap_backward(y->tensor(), cap, x->tensor(), y->tensor());  // dx = y
    EXPECT_TRUE(close_to_reference(y->values(), want_over_y, kF32));
  }
}

TEST_P(BackwardLayers, ActivationsRejectMismatchedSizesAndOverlaps) {
  auto a = input({10});
  auto b = input({10});
  auto c = input({10});
  auto longer = input({11});
  auto y = output({10});
  auto z = output({10});
  EXPECT_THROW(backend_->gelu_backward(a->tensor(), GeluForm::Tanh, longer->tensor(), y->tensor()), Error);
  EXPECT_THROW(backend_->gelu_backward(a->tensor(), GeluForm::Erf, b->tensor(), longer->tensor()), Error);
  EXPECT_THROW(backend_->gelu_backward(a->tensor(), GeluForm::Erf, b->tensor(), a->tensor()),
               Error);  // dx = x
  EXPECT_THROW(
      backend_->swiglu_backward(a->tensor(), longer->tensor(), c->tensor(), y->tensor(), z->tensor()), Error);
  EXPECT_THROW(backend_->swiglu_backward(a->tensor(), b->tensor(), c->tensor(), y->tensor(), y->tensor()),
               Error);  // dgate and dup must be distinct
  auto big = input({11});
  const Tensor shifted(big->tensor().as<float>() + 1, DType::F32, {10});
  EXPECT_THROW(backend_->swiglu_backward(big->tensor().slice_rows(0, 10), b->tensor(), c->tensor(), shifted,
                                         z->tensor()),
               Error);
  EXPECT_THROW(backend_->geglu_backward(a->tensor(), b->tensor(), c->tensor(), y->tensor(), y->tensor()),
               Error);
  EXPECT_THROW(backend_->softcap_backward(a->tensor(), 0.0f, b->tensor(), y->tensor()), Error);  // cap 0
  EXPECT_THROW(backend_->softcap_backward(a->tensor(), 2.0f, longer->tensor(), y->tensor()), Error);
  EXPECT_THROW(backend_->softcap_backward(big->tensor().slice_rows(0, 10), 2.0f, b->tensor(), shifted),
               Error);
  auto half = input(DType::BF16, {10});
  EXPECT_THROW(backend_->gelu_backward(half->tensor(), GeluForm::Tanh, b->tensor(), y->tensor()), Error);
  EXPECT_GUARDS(y);
  EXPECT_UNCHANGED(a);
}

// ---------------------------------------------------------------- rope

TEST_P(BackwardLayers, RopeBothLayoutsMatchReference) {
  // {n, heads, head_dim, rotary_dim}: whole and partial rotation, odd head counts.
  const int64_t cases[][4] = {{1, 4, 16, 16}, {13, 3, 10, 6}, {7, 3, 80, 32}, {5, 2, 64, 64}, {3, 5, 64, 16}};
  for (const RopeLayout layout : {RopeLayout::Neox, RopeLayout::Interleaved}) {
    for (const auto& [n, heads, head_dim, rotary_dim] : cases) {
      SCOPED_TRACE(std::string(layout == RopeLayout::Neox ? "neox" : "interleaved") +
                   " n=" + std::to_string(n) + " head_dim=" + std::to_string(head_dim) +
                   " rotary=" + std::to_string(rotary_dim));
      auto dx = input({n, heads, head_dim});
      auto freq = frequencies(rotary_dim);
      std::vector<int32_t> positions(static_cast<size_t>(n));
      std::uniform_int_distribution<int32_t> position(0, 8191);
      std::generate(positions.begin(), positions.end(), [&] { return position(rng_); });
      const float magnitude = rotary_dim == head_dim ? 1.0f : 1.1902f;  // partial: Phi-4-mini's
      const auto want = reference::rope_backward(dx->tensor(), positions, freq->tensor(), layout, magnitude);
      backend_->rope_backward(dx->tensor(), positions, freq->tensor(), layout, magnitude);
      EXPECT_TRUE(close_to_reference(dx->values(), want, kF32));
      EXPECT_GUARDS(dx);
      EXPECT_UNCHANGED(freq);
    }
  }
}

TEST_P(BackwardLayers, RopeBackwardUndoesTheForward) {
  // R^T R = 1: the backward applied to the forward's output gives the input back.
  auto x = input({13, 3, 10});
  const auto original = x->values();
  auto freq = frequencies(6);
  std::vector<int32_t> positions(13);
  for (size_t t = 0; t < positions.size(); ++t) positions[t] = static_cast<int32_t>(300 * t);
  for (const RopeLayout layout : {RopeLayout::Neox, RopeLayout::Interleaved}) {
    backend_->rope(x->tensor(), positions, freq->tensor(), layout, 1.0f);
    backend_->rope_backward(x->tensor(), positions, freq->tensor(), layout, 1.0f);
    EXPECT_TRUE(close_to_reference(x->values(), std::vector<double>(original.begin(), original.end()), kF32));
  }
}

TEST_P(BackwardLayers, RopeRejectsBadShapes) {
  auto dx = input({2, 2, 8});
  auto freq = input({5});  // rotates 10 > 8
  auto freq_ok = input({4});
  const std::vector<int32_t> two = {0, 1}, one = {0};
  EXPECT_THROW(backend_->rope_backward(dx->tensor(), two, freq->tensor(), RopeLayout::Neox, 1.0f), Error);
  EXPECT_THROW(backend_->rope_backward(dx->tensor(), one, freq_ok->tensor(), RopeLayout::Interleaved, 1.0f),
               Error);
  EXPECT_THROW(
      backend_->rope_backward(dx->tensor().reshaped({2, 16}), two, freq_ok->tensor(), RopeLayout::Neox, 1.0f),
      Error);
  EXPECT_THROW(backend_->rope_backward(dx->tensor(), two, freq_ok->tensor(), RopeLayout::Neox, 0.0f), Error);
  EXPECT_UNCHANGED(dx);
}

// ---------------------------------------------------------------- attention

struct AttentionCase {
  int64_t head_dim, heads, kv_heads, n;
  float scale;  // 0: 1 / sqrt(head_dim)
  int64_t window = 0;
  float softcap = 0.0f;
};

struct AttentionRun {
  std::unique_ptr<GuardedBuffer> q, k, v, out, dout, dq, dk, dv;
};

class BackwardAttention : public BackwardLayers {
 protected:
  // Random q, k, v, dout; out from the backend's forward; dq, dk, dv NaN.
  AttentionRun prepare(const AttentionCase& c) {
    AttentionRun r;
    r.q = input({c.n, c.heads, c.head_dim}, 0.05f, 2.0f);
    r.k = input({c.n, c.kv_heads, c.head_dim});
    r.v = input({c.n, c.kv_heads, c.head_dim});
    r.out = output({c.n, c.heads, c.head_dim});
    r.dout = input({c.n, c.heads, c.head_dim});
    r.dq = output({c.n, c.heads, c.head_dim});
    r.dk = output({c.n, c.kv_heads, c.head_dim});
    r.dv = output({c.n, c.kv_heads, c.head_dim});
    backend_->attention(r.q->tensor(), r.k->tensor(), r.v->tensor(), 0, scale(c), r.out->tensor());
    r.out->snapshot();
    return r;
  }
  void backward(const AttentionRun& r, const AttentionCase& c) {
    backend_->attention_backward(r.q->tensor(), r.k->tensor(), r.v->tensor(), r.out->tensor(),
                                 r.dout->tensor(), scale(c), r.dq->tensor(), r.dk->tensor(), r.dv->tensor());
  }
  static AttentionScores scale(const AttentionCase& c) {
    return {c.scale != 0 ? c.scale : 1.0f / std::sqrt(static_cast<float>(c.head_dim)), c.window, c.softcap};
  }
  // The backward of case c against the float64 reference; the outputs' guards intact.
  void expect_matches_reference(const AttentionCase& c) {
    const AttentionRun r = prepare(c);
    backward(r, c);
    const auto want = reference::attention_backward(r.q->tensor(), r.k->tensor(), r.v->tensor(),
                                                    r.dout->tensor(), scale(c));
    EXPECT_TRUE(close_to_reference(r.dq->values(), want.dq, kF32));
    EXPECT_TRUE(close_to_reference(r.dk->values(), want.dk, kF32));
    EXPECT_TRUE(close_to_reference(r.dv->values(), want.dv, kF32));
    for (const auto* b : {r.dq.get(), r.dk.get(), r.dv.get()}) EXPECT_TRUE(b->guards_intact());
    for (const auto* b : {r.q.get(), r.k.get(), r.v.get(), r.out.get(), r.dout.get()})
      EXPECT_TRUE(b->unchanged_since_snapshot());
  }
};

TEST_P(BackwardAttention, MatchesReference) {
  const AttentionCase cases[] = {
      {10, 6, 2, 13, 0},
      {10, 6, 3, 13, 0},
      {10, 6, 6, 13, 0},
      {16, 4, 4, 1, 0},
      {16, 4, 1, 2, 0},
      {64, 8, 1, 37, 0},
      {20, 2, 1, 6, 0},
      {37, 5, 5, 9, 0},
      {64, 4, 2, 40, 4.0f},  // scores up to ~500:
                             // the softmax must
                             // subtract its max
      // Sliding windows (shorter than the sequence, of one position, and longer) and soft caps.
      {16, 4, 2, 37, 0, 5},
      {10, 6, 3, 13, 0, 1},
      {64, 4, 2, 40, 0, 64},
      {16, 4, 4, 21, 4.0f, 0, 3.0f},
      {16, 6, 2, 33, 0, 9, 2.5f},
  };
  for (const int threads : {0, 1}) {
    set_thread_count(threads);
    for (const AttentionCase& c : cases) {
      SCOPED_TRACE("threads=" + std::to_string(threads) + " head_dim=" + std::to_string(c.head_dim) +
                   " heads=" + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) +
                   " n=" + std::to_string(c.n) + " window=" + std::to_string(c.window) +
                   " softcap=" + std::to_string(c.softcap));
      expect_matches_reference(c);
    }
  }
}

// The shapes the tiled CUDA backward must get right: partial item and key tiles (n = 1, 7, 33,
// 130, 1000 against 64-item, 32-key tiles), every group size 1..8, the head sizes models use.
TEST_P(BackwardAttention, MatchesReferenceOnOddLengthsGroupsAndHeadSizes) {
  const AttentionCase cases[] = {
      {64, 8, 1, 130, 0}, {80, 6, 2, 33, 0}, {96, 4, 4, 7, 0},  {128, 4, 1, 130, 0},
      {128, 7, 1, 1, 0},  {96, 5, 1, 33, 0}, {80, 6, 1, 65, 0}, {64, 2, 1, 1000, 0},
  };
  for (const AttentionCase& c : cases) {
    SCOPED_TRACE("head_dim=" + std::to_string(c.head_dim) + " heads=" + std::to_string(c.heads) + "/" +
                 std::to_string(c.kv_heads) + " n=" + std::to_string(c.n));
    expect_matches_reference(c);
  }
}

TEST_P(BackwardAttention, IsBitwiseIndependentOfThreadCount) {
  for (const AttentionCase& c : {AttentionCase{64, 8, 2, 50, 0}, AttentionCase{10, 6, 6, 13, 0},
                                 AttentionCase{16, 4, 2, 30, 0, 7, 3.0f}}) {
    const AttentionRun r = prepare(c);
    std::vector<std::vector<float>> first;
    for (const int threads : {1, 2, 3, 5}) {
      set_thread_count(threads);
      for (auto* b : {r.dq.get(), r.dk.get(), r.dv.get()}) b->fill(NAN);
      backward(r, c);
      const std::vector<std::vector<float>> got = {r.dq->values(), r.dk->values(), r.dv->values()};
      if (first.empty()) first = got;
      EXPECT_EQ(got, first) << threads << " threads, kv_heads " << c.kv_heads;
    }
  }
}

TEST_P(BackwardAttention, RejectsBadShapesDtypesAndOverlaps) {
  auto q = input({3, 4, 16});
  auto k = input({3, 2, 16});
  auto v = input({3, 2, 16});
  auto out = input({3, 4, 16});
  auto dout = input({3, 4, 16});
  auto dq = output({3, 4, 16});
  auto dk = output({3, 2, 16});
  auto dv = output({3, 2, 16});
  auto k3 = input({3, 3, 16});  // 4 heads cannot share 3 kv heads
  auto k_long = input({4, 2, 16});
  auto k_narrow = input({3, 2, 8});
  auto k_bf16 = input(DType::BF16, {3, 2, 16});
  auto dk_small = output({3, 1, 16});
  const auto call = [&](const GuardedBuffer& kk, const GuardedBuffer& vv, const Tensor& dq_t,
                        const Tensor& dk_t) {
    backend_->attention_backward(q->tensor(), kk.tensor(), vv.tensor(), out->tensor(), dout->tensor(), 0.25f,
                                 dq_t, dk_t, dv->tensor());
  };
  EXPECT_THROW(call(*k3, *k3, dq->tensor(), dk->tensor()), Error);
  EXPECT_THROW(call(*k_long, *k_long, dq->tensor(), dk->tensor()), Error);
  EXPECT_THROW(call(*k_narrow, *k_narrow, dq->tensor(), dk->tensor()), Error);
  EXPECT_THROW(call(*k, *k_narrow, dq->tensor(), dk->tensor()), Error);
  EXPECT_THROW(call(*k_bf16, *k_bf16, dq->tensor(), dk->tensor()), Error);
  EXPECT_THROW(call(*k, *v, dq->tensor(), dk_small->tensor()), Error);
  EXPECT_THROW(call(*k, *v, q->tensor(), dk->tensor()), Error);   // dq over q
  EXPECT_THROW(call(*k, *v, dq->tensor(), dq->tensor()), Error);  // dk over dq
  auto sinks = input(DType::F32, {q->tensor().dim(1)});
  AttentionScores with_sinks(0.25f);
  with_sinks.sinks = &sinks->tensor();  // a forward-only feature
  for (const AttentionScores bad :
       {AttentionScores(0.25f, -1, 0.0f), AttentionScores(0.25f, 0, -1.0f), AttentionScores(NAN, 0, 0.0f),
        AttentionScores(0.25f, 0, INFINITY), with_sinks})
    EXPECT_THROW(backend_->attention_backward(q->tensor(), k->tensor(), v->tensor(), out->tensor(),
                                              dout->tensor(), bad, dq->tensor(), dk->tensor(), dv->tensor()),
                 Error);
  EXPECT_GUARDS(dq);
  EXPECT_GUARDS(dk);
  EXPECT_UNCHANGED(q);
  EXPECT_UNCHANGED(k);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BackwardLayers, ::testing::ValuesIn(backends_under_test()),
                         backend_test_name);
INSTANTIATE_TEST_SUITE_P(AllBackends, BackwardAttention, ::testing::ValuesIn(attention_backends_under_test()),
                         backend_test_name);

}  // namespace
}  // namespace tokenmill::testing
