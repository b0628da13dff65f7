// Training ops, linear part: matmul_backward, embedding_backward, cross_entropy,
// sum_squares and adamw_step.
//
// 1. The float64 reference (reference_backward.h) is the true gradient: it matches central
//    finite differences of the forward reference (reference_ops.h) on small shapes. The
//    perturbed inputs are f32, so each difference is divided by the perturbation actually
//    stored (x + h and x - h after rounding); the linear ops then agree to rounding, the
//    cross-entropy to O(h^2).
// 2. Every backend matches the reference on seeded random non-zero inputs of odd sizes,
//    outputs between canary bytes, inputs unchanged. Parameter gradients start non-zero and
//    must end at start + gradient. Tolerances, as max |got - want| / max |want| per output:
//    kF32 (1e-5) for f32 arithmetic, bf16/f16 weights included (the reference reads the
//    same rounded weights, and for dx the rounded dy of a backend that rounds matmul
//    activations: matmul_activations.h); sum_squares 1e-12 (products of f32 values are
//    exact in double, only the summation order differs).
// 3. Shape mismatches, overlaps and bad ids / targets throw Error.
// Every CPU op must give the same bits with 1 and with several threads.
#include <gtest/gtest.h>

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
#include "matmul_activations.h"

namespace tokenmill::testing {
namespace {

constexpr double kF32 = 1e-5;
constexpr double kFiniteDifference = 1e-6;
constexpr double kDoubleSum = 1e-12;

// ---------------------------------------------------------------- 1. reference vs finite differences

// An f32 host tensor of random non-zero values in [-1, -0.05] u [0.05, 1].
struct HostTensor {
  std::vector<float> values;
  Tensor tensor;
  HostTensor(std::mt19937_64& rng, std::initializer_list<int64_t> dims) : tensor(nullptr, DType::F32, dims) {
    std::uniform_real_distribution<float> magnitude(0.05f, 1.0f);
    std::bernoulli_distribution negative(0.5);
    values.resize(static_cast<size_t>(tensor.numel()));
    for (float& v : values) v = negative(rng) ? -magnitude(rng) : magnitude(rng);
    tensor.data = values.data();
  }
  HostTensor(const HostTensor&) = delete;  // `tensor` points into `values`
  HostTensor& operator=(const HostTensor&) = delete;
};

// d loss / d values[i] for every i, by central differences.
std::vector<double> numeric_gradient(std::vector<float>& values, const std::function<double()>& loss,
                                     float h) {
  std::vector<double> grad(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const float saved = values[i], up = saved + h, down = saved - h;
    values[i] = up;
    const double loss_up = loss();
    values[i] = down;
    const double loss_down = loss();
    values[i] = saved;
    grad[i] = (loss_up - loss_down) / (static_cast<double>(up) - static_cast<double>(down));
  }
  return grad;
}

// max |got - want| / max |want|.
double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double max_want = 1e-300, max_error = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    max_want = std::max(max_want, std::abs(want[i]));
    max_error = std::max(max_error, std::abs(got[i] - want[i]));
  }
  return max_error / max_want;
}

// sum_i weights[i] * y[i]: a scalar loss whose gradient with respect to y is `weights`.
double weighted_sum(const std::vector<float>& weights, const std::vector<double>& y) {
  EXPECT_EQ(weights.size(), y.size());
  double sum = 0;
  for (size_t i = 0; i < y.size() && i < weights.size(); ++i) sum += static_cast<double>(weights[i]) * y[i];
  return sum;
}

TEST(BackwardLinearReference, MatmulBackwardIsTheGradientOfMatmul) {
  std::mt19937_64 rng(7);
  const int64_t n = 3, k = 5, m = 4;
  HostTensor x(rng, {n, k}), w(rng, {m, k}), bias(rng, {m}), dy(rng, {n, m});
  const auto loss = [&] {
    return weighted_sum(dy.values, reference::matmul(x.tensor, w.tensor, &bias.tensor));
  };
  const reference::MatmulGrads grads = reference::matmul_backward(x.tensor, w.tensor, dy.tensor);
  EXPECT_LE(relative_error(grads.dx, numeric_gradient(x.values, loss, 1e-2f)), kFiniteDifference);
  EXPECT_LE(relative_error(grads.dw, numeric_gradient(w.values, loss, 1e-2f)), kFiniteDifference);
  EXPECT_LE(relative_error(grads.db, numeric_gradient(bias.values, loss, 1e-2f)), kFiniteDifference);
}

TEST(BackwardLinearReference, EmbeddingBackwardIsTheGradientOfEmbedding) {
  std::mt19937_64 rng(8);
  const int64_t vocab = 6, d = 3;
  const std::vector<int32_t> ids = {2, 0, 2, 5, 2};
  HostTensor table(rng, {vocab, d}), dout(rng, {static_cast<int64_t>(ids.size()), d});
  const auto loss = [&] { return weighted_sum(dout.values, reference::embedding(table.tensor, ids)); };
  EXPECT_LE(relative_error(reference::embedding_backward(ids, dout.tensor, vocab),
                           numeric_gradient(table.values, loss, 1e-2f)),
            kFiniteDifference);
}

TEST(BackwardLinearReference, CrossEntropyIsTheGradientOfMinusLogSoftmax) {
  std::mt19937_64 rng(9);
  const int64_t n = 4, vocab = 5;
  const std::vector<int32_t> targets = {1, -1, 4, 0};  // row 1 ignored
  const double grad_scale = 0.37;
  HostTensor logits(rng, {n, vocab});
  // The forward: grad_scale * sum over the kept rows of -log(softmax(logits)[target]).
  const auto loss = [&] {
    const std::vector<double> p = reference::softmax(logits.tensor);
    double sum = 0;
    for (int64_t t = 0; t < n; ++t)
      if (targets[static_cast<size_t>(t)] >= 0)
        sum -= std::log(p[static_cast<size_t>(t * vocab + targets[t])]);
    return grad_scale * sum;
  };
  const reference::CrossEntropy ce = reference::cross_entropy(logits.tensor, targets, grad_scale);
  EXPECT_LE(relative_error(ce.dlogits, numeric_gradient(logits.values, loss, 1e-3f)), kFiniteDifference);
  const std::vector<double> p = reference::softmax(logits.tensor);
  for (int64_t t = 0; t < n; ++t) {
    const int32_t target = targets[static_cast<size_t>(t)];
    const double want = target < 0 ? 0.0 : -std::log(p[static_cast<size_t>(t * vocab + target)]);
    EXPECT_NEAR(ce.losses[static_cast<size_t>(t)], want, 1e-12) << "row " << t;
  }
}

TEST(BackwardLinearReference, SumSquaresOfAHandExample) {
  std::vector<float> values = {1.0f, -2.0f, 3.0f, 0.5f};
  const Tensor x(values.data(), DType::F32, {2, 2});
  EXPECT_EQ(reference::sum_squares(x), 14.25);
}

// ---------------------------------------------------------------- hand-checked examples

// logits [[1, 2, 3], [0, 0, 0]], targets {2, 0}, grad_scale 1:
//   row 0: logsumexp = 3 + log(1 + e^-1 + e^-2) = 3.4076059644; loss = 0.4076059644;
//          softmax = [0.0900305732, 0.2447284711, 0.6652409558], minus onehot(2).
//   row 1: logsumexp = log 3, loss = 1.0986122887; softmax = 1/3 each, minus onehot(0).
const float kHandLogits[] = {1, 2, 3, 0, 0, 0};
const int32_t kHandTargets[] = {2, 0};
const double kHandLosses[] = {0.4076059644443806, 1.0986122886681098};
const double kHandDlogits[] = {
    0.09003057317038046, 0.24472847105479764, 0.6652409557748218 - 1, 1.0 / 3 - 1, 1.0 / 3, 1.0 / 3};

// Three AdamW steps on two elements; lr 0.125, beta1 0.875, beta2 1 - 2^-10, weight decay
// 0.0625, eps 1e-8 (all exact in f32 but eps), grad_scale 0.5 on stored gradients
// {1, -0.5}, {-0.5, 0.25}, {2, 1}; param starts {1, -0.5}, m = v = 0. Step 1, element 0
// (g = 0.5 * 1 = 0.5):
//   param = 1 * (1 - 0.125 * 0.0625) = 0.9921875
//   m = 0.125 * 0.5 = 0.0625;   v = 2^-10 * 0.25 = 0.000244140625
//   m / (1 - 0.875) = 0.5;   v / (1 - (1 - 2^-10)) = 0.25, sqrt 0.5
//   param = 0.9921875 - 0.125 * 0.5 / (0.5 + 1e-8) = 0.8671875025
// Steps 2 and 3 continue the same arithmetic in double (with eps as stored in f32), each
// from the previous state rounded to f32, as it is stored between steps (m and v stay exact).
const Backend::AdamW kHandHyper{
    .lr = 0.125f, .beta1 = 0.875f, .beta2 = 1.0f - 1.0f / 1024, .eps = 1e-8f, .weight_decay = 0.0625f};
const float kHandGrads[3][2] = {{1.0f, -0.5f}, {-0.5f, 0.25f}, {2.0f, 1.0f}};
const double kHandParam[3][2] = {{0.86718750249999998, -0.37109375499999975},
                                 {0.82878518633012188, -0.33656716955223143},
                                 {0.73902481260464614, -0.39374677059813523}};
const double kHandM[3][2] = {{0.0625, -0.03125}, {0.0234375, -0.01171875}, {0.1455078125, 0.05224609375}};
const double kHandV[3][2] = {{0.000244140625, 6.103515625e-05},
                             {0.00030493736267089844, 7.6234340667724609e-05},
                             {0.0012812020722776651, 0.00032030051806941628}};

TEST(BackwardLinearReference, CrossEntropyOfAHandExample) {
  std::vector<float> logits(std::begin(kHandLogits), std::end(kHandLogits));
  const reference::CrossEntropy ce =
      reference::cross_entropy(Tensor(logits.data(), DType::F32, {2, 3}), kHandTargets, 1.0);
  for (size_t t = 0; t < 2; ++t) EXPECT_NEAR(ce.losses[t], kHandLosses[t], 1e-15);
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(ce.dlogits[i], kHandDlogits[i], 1e-15);
}

TEST(BackwardLinearReference, AdamWStepsOfAHandExample) {
  std::vector<float> param = {1.0f, -0.5f}, m = {0, 0}, v = {0, 0};
  for (int step = 0; step < 3; ++step) {
    std::vector<float> grad(std::begin(kHandGrads[step]), std::end(kHandGrads[step]));
    Backend::AdamW hyper = kHandHyper;
    hyper.step = step + 1;
    hyper.grad_scale = 0.5f;
    const reference::AdamWState s =
        reference::adamw_step(Tensor(param.data(), DType::F32, {2}), Tensor(grad.data(), DType::F32, {2}),
                              Tensor(m.data(), DType::F32, {2}), Tensor(v.data(), DType::F32, {2}), hyper);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_NEAR(s.param[i], kHandParam[step][i], 1e-15) << "step " << step + 1;
      EXPECT_NEAR(s.m[i], kHandM[step][i], 1e-15) << "step " << step + 1;
      EXPECT_NEAR(s.v[i], kHandV[step][i], 1e-15) << "step " << step + 1;
      param[i] = static_cast<float>(s.param[i]);
      m[i] = static_cast<float>(s.m[i]);
      v[i] = static_cast<float>(s.v[i]);
    }
  }
}

// ---------------------------------------------------------------- 2. backends vs reference

class BackwardLinear : public BackendOpTest {
 protected:
  BackwardLinear() : BackendOpTest(20251203) {}
};

// start[i] + gradient[i]: what an accumulated parameter gradient must hold.
std::vector<double> plus(const std::vector<float>& start, const std::vector<double>& gradient) {
  std::vector<double> sum(gradient);
  for (size_t i = 0; i < sum.size() && i < start.size(); ++i) sum[i] += start[i];
  return sum;
}

std::string dtype_label(DType t) { return std::string(dtype_name(t)); }

// ---------------------------------------------------------------- matmul_backward

struct LinearShape {
  int64_t n, m, k;
};
// n = 1 (a contraction of one token for dw), n <= 4 (one partial token tile) and n > 4, odd m
// and k, m = 1 and k = 1, k past one 256-wide GEMM block, n past one 1024-token chunk of
// the CPU backend (a GEMV-sized last chunk).
const LinearShape kLinearShapes[] = {{1, 37, 19},  {5, 37, 19},   {3, 1, 7},     {4, 9, 1},
                                     {13, 50, 33}, {37, 70, 300}, {2, 130, 257}, {1027, 9, 13}};

TEST_P(BackwardLinear, MatmulBackwardMatchesReferenceForEveryWeightDtype) {
  for (const DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    for (const LinearShape& s : kLinearShapes) {
      SCOPED_TRACE(dtype_label(dtype) + " n=" + std::to_string(s.n) + " m=" + std::to_string(s.m) +
                   " k=" + std::to_string(s.k));
      auto x = input(DType::F32, {s.n, s.k});
      auto w = input(dtype, {s.m, s.k});
      auto dy = input(DType::F32, {s.n, s.m});
      auto dx = output({s.n, s.k});
      auto dw = input(DType::F32, {s.m, s.k});
      auto db = input(DType::F32, {s.m});
      const std::vector<float> dw_start = dw->values(), db_start = db->values();
      backend_->matmul_backward(x->tensor(), w->tensor(), dy->tensor(), dx->ptr(), dw->ptr(), db->ptr());
      const reference::MatmulGrads want = reference::matmul_backward(x->tensor(), w->tensor(), dy->tensor());
      const MatmulActivations dy_read(GetParam(), *dy, dtype);
      const std::vector<double> want_dx =
          reference::matmul_backward(x->tensor(), w->tensor(), dy_read.tensor()).dx;
      EXPECT_TRUE(close_to_reference(dx->values(), want_dx, kF32)) << "dx";
      EXPECT_TRUE(close_to_reference(dw->values(), plus(dw_start, want.dw), kF32)) << "dw";
      EXPECT_TRUE(close_to_reference(db->values(), plus(db_start, want.db), kF32)) << "db";
      EXPECT_GUARDS(dx);
      EXPECT_GUARDS(dw);
      EXPECT_GUARDS(db);
      EXPECT_UNCHANGED(x);
      EXPECT_UNCHANGED(w);
      EXPECT_UNCHANGED(dy);
    }
  }
}

TEST_P(BackwardLinear, MatmulBackwardComputesOnlyTheRequestedOutputs) {
  const int64_t n = 5, m = 37, k = 19;
  auto x = input(DType::F32, {n, k});
  auto w = input(DType::BF16, {m, k});
  auto dy = input(DType::F32, {n, m});
  const reference::MatmulGrads want = reference::matmul_backward(x->tensor(), w->tensor(), dy->tensor());
  const MatmulActivations dy_read(GetParam(), *dy, DType::BF16);
  const std::vector<double> want_dx =
      reference::matmul_backward(x->tensor(), w->tensor(), dy_read.tensor()).dx;
  for (int mask = 0; mask < 8; ++mask) {
    SCOPED_TRACE("outputs mask " + std::to_string(mask));
    auto dx = output({n, k});
    auto dw = input(DType::F32, {m, k});
    auto db = input(DType::F32, {m});
    const std::vector<float> dw_start = dw->values(), db_start = db->values();
    const bool with_dx = (mask & 1) != 0, with_dw = (mask & 2) != 0, with_db = (mask & 4) != 0;
    backend_->matmul_backward(x->tensor(), w->tensor(), dy->tensor(), with_dx ? dx->ptr() : nullptr,
                              with_dw ? dw->ptr() : nullptr, with_db ? db->ptr() : nullptr);
    if (with_dx) {
      EXPECT_TRUE(close_to_reference(dx->values(), want_dx, kF32));
    } else {
      for (const float v : dx->values()) EXPECT_TRUE(std::isnan(v)) << "dx written though null";
    }
    if (with_dw) {
      EXPECT_TRUE(close_to_reference(dw->values(), plus(dw_start, want.dw), kF32));
    } else {
      EXPECT_EQ(dw->values(), dw_start) << "dw written though null";
    }
    if (with_db) {
      EXPECT_TRUE(close_to_reference(db->values(), plus(db_start, want.db), kF32));
    } else {
      EXPECT_EQ(db->values(), db_start) << "db written though null";
    }
  }
}

TEST_P(BackwardLinear, MatmulBackwardIsBitwiseIndependentOfThreadCount) {
  const int64_t n = 37, m = 1030, k = 70;
  auto x = input(DType::F32, {n, k});
  auto w = input(DType::BF16, {m, k});
  auto dy = input(DType::F32, {n, m});
  std::vector<float> results[2][3];
  for (const int threads : {1, 4}) {
    set_thread_count(threads);
    auto dx = output({n, k});
    auto dw = buffer(DType::F32, {m, k});
    auto db = buffer(DType::F32, {m});
    dw->fill(0.25f);
    db->fill(0.25f);
    backend_->matmul_backward(x->tensor(), w->tensor(), dy->tensor(), dx->ptr(), dw->ptr(), db->ptr());
    results[threads == 1 ? 0 : 1][0] = dx->values();
    results[threads == 1 ? 0 : 1][1] = dw->values();
    results[threads == 1 ? 0 : 1][2] = db->values();
  }
  EXPECT_EQ(results[0][0], results[1][0]) << "dx";
  EXPECT_EQ(results[0][1], results[1][1]) << "dw";
  EXPECT_EQ(results[0][2], results[1][2]) << "db";
}

TEST_P(BackwardLinear, MatmulBackwardRejectsBadShapesOverlapsAndQuantizedWeights) {
  auto x = input(DType::F32, {3, 32});
  auto w = input(DType::F32, {8, 32});
  auto dy = input(DType::F32, {3, 8});
  auto dx = output({3, 32});
  auto dw = output({8, 32});
  auto db = output({8});
  const auto call = [&](const Tensor& xt, const Tensor& wt, const Tensor& dyt, const Tensor* dxt,
                        const Tensor* dwt,
                        const Tensor* dbt) { backend_->matmul_backward(xt, wt, dyt, dxt, dwt, dbt); };
  auto wrong_dx = output({3, 31});
  auto wrong_dw = output({9, 32});
  auto wrong_db = output({7});
  auto wrong_dy = input(DType::F32, {3, 9});
  auto wrong_x = input(DType::F32, {2, 32});
  auto bf16_dw = buffer(DType::BF16, {8, 32});
  auto quantized_w = buffer(DType::Q8_0, {8, 32});
  EXPECT_THROW(call(x->tensor(), w->tensor(), dy->tensor(), wrong_dx->ptr(), nullptr, nullptr), Error);
  EXPECT_THROW(call(x->tensor(), w->tensor(), dy->tensor(), nullptr, wrong_dw->ptr(), nullptr), Error);
  EXPECT_THROW(call(x->tensor(), w->tensor(), dy->tensor(), nullptr, nullptr, wrong_db->ptr()), Error);
  EXPECT_THROW(call(x->tensor(), w->tensor(), wrong_dy->tensor(), dx->ptr(), dw->ptr(), db->ptr()), Error);
  EXPECT_THROW(call(wrong_x->tensor(), w->tensor(), dy->tensor(), dx->ptr(), dw->ptr(), db->ptr()), Error);
  EXPECT_THROW(call(x->tensor(), w->tensor(), dy->tensor(), nullptr, bf16_dw->ptr(), nullptr), Error);
  EXPECT_THROW(call(x->tensor(), quantized_w->tensor(), dy->tensor(), dx->ptr(), nullptr, nullptr), Error);
  // An output over an input, and two outputs over each other.
  EXPECT_THROW(call(x->tensor(), w->tensor(), dy->tensor(), x->ptr(), nullptr, nullptr), Error);
  const Tensor db_inside_dw = dw->tensor().reshaped({256}).slice_rows(3, 8);
  EXPECT_THROW(call(x->tensor(), w->tensor(), dy->tensor(), nullptr, dw->ptr(), &db_inside_dw), Error);
  EXPECT_GUARDS(dx);
  EXPECT_GUARDS(dw);
  EXPECT_GUARDS(db);
}

// ---------------------------------------------------------------- embedding_backward

TEST_P(BackwardLinear, EmbeddingBackwardAccumulatesRowsInTokenOrder) {
  const int64_t vocab = 37;
  const std::vector<int32_t> ids = {0, 36, 5, 5, 17, 1, 35, 0, 20, 5};
  for (const int64_t d : {1, 17, 80, 1001}) {
    SCOPED_TRACE("d=" + std::to_string(d));
    auto dout = input(DType::F32, {static_cast<int64_t>(ids.size()), d});
    auto dtable = input(DType::F32, {vocab, d});
    const std::vector<float> start = dtable->values();
    backend_->embedding_backward(ids, dout->tensor(), dtable->tensor());
    EXPECT_TRUE(close_to_reference(
        dtable->values(), plus(start, reference::embedding_backward(ids, dout->tensor(), vocab)), kF32));
    EXPECT_GUARDS(dtable);
    EXPECT_UNCHANGED(dout);
  }
}

TEST_P(BackwardLinear, EmbeddingBackwardIsBitwiseIndependentOfThreadCount) {
  const int64_t vocab = 50, d = 2001, n = 40;
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (size_t t = 0; t < ids.size(); ++t) ids[t] = static_cast<int32_t>(t * 7 % 11);  // many repeats
  auto dout = input(DType::F32, {n, d});
  std::vector<float> results[2];
  for (const int threads : {1, 4}) {
    set_thread_count(threads);
    auto dtable = buffer(DType::F32, {vocab, d});
    dtable->fill(0.1f);
    backend_->embedding_backward(ids, dout->tensor(), dtable->tensor());
    results[threads == 1 ? 0 : 1] = dtable->values();
  }
  EXPECT_EQ(results[0], results[1]);
}

TEST_P(BackwardLinear, EmbeddingBackwardRejectsBadIdsAndShapesWithoutWriting) {
  auto dout = input(DType::F32, {2, 8});
  auto dtable = input(DType::F32, {10, 8});
  const std::vector<int32_t> negative = {1, -1}, too_big = {1, 10}, three = {1, 2, 3}, ok = {1, 2};
  EXPECT_THROW(backend_->embedding_backward(negative, dout->tensor(), dtable->tensor()), Error);
  try {
    backend_->embedding_backward(too_big, dout->tensor(), dtable->tensor());
    ADD_FAILURE() << "id 10 of a 10-row table was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("id 10"), std::string::npos) << e.what();
  }
  EXPECT_THROW(backend_->embedding_backward(three, dout->tensor(), dtable->tensor()), Error);
  auto narrow = input(DType::F32, {2, 7});
  EXPECT_THROW(backend_->embedding_backward(ok, narrow->tensor(), dtable->tensor()), Error);
  auto bf16_table = buffer(DType::BF16, {10, 8});
  EXPECT_THROW(backend_->embedding_backward(ok, dout->tensor(), bf16_table->tensor()), Error);
  EXPECT_UNCHANGED(dtable);  // ids are checked before anything is added
  EXPECT_GUARDS(dtable);
}

// ---------------------------------------------------------------- cross_entropy

TEST_P(BackwardLinear, CrossEntropyOfAHandExample) {
  auto logits = buffer(DType::F32, {2, 3});
  for (int64_t i = 0; i < 6; ++i) logits->set(i, kHandLogits[i]);
  auto losses = output({2});
  backend_->cross_entropy(logits->tensor(), kHandTargets, 1.0f, losses->tensor(), logits->ptr());
  const std::vector<float> loss = losses->values(), grad = logits->values();
  for (size_t t = 0; t < 2; ++t) EXPECT_NEAR(loss[t], kHandLosses[t], 1e-6);
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(grad[i], kHandDlogits[i], 1e-6);
}

TEST_P(BackwardLinear, CrossEntropyMatchesReferenceSeparateAndInPlace) {
  for (const int64_t vocab : {1, 13, 517, 4099}) {
    // Large logits (up to 100) overflow exp in f32 unless the row max is subtracted.
    for (const float hi : {4.0f, 100.0f}) {
      SCOPED_TRACE("vocab=" + std::to_string(vocab) + " |logits| <= " + std::to_string(hi));
      const int64_t n = 7;
      const std::vector<int32_t> targets = {
          0,  static_cast<int32_t>(vocab - 1), -1, static_cast<int32_t>(vocab / 2), 0,
          -7, static_cast<int32_t>(vocab / 3)};
      const float grad_scale = 0.37f;
      auto logits = input(DType::F32, {n, vocab}, 0.05f, hi);
      const reference::CrossEntropy want = reference::cross_entropy(logits->tensor(), targets, grad_scale);

      auto losses = output({n});
      auto dlogits = output({n, vocab});
      backend_->cross_entropy(logits->tensor(), targets, grad_scale, losses->tensor(), dlogits->ptr());
      EXPECT_TRUE(close_to_reference(losses->values(), want.losses, kF32)) << "losses";
      EXPECT_TRUE(close_to_reference(dlogits->values(), want.dlogits, kF32)) << "dlogits";
      EXPECT_GUARDS(losses);
      EXPECT_GUARDS(dlogits);
      EXPECT_UNCHANGED(logits);

      auto losses_only = output({n});
      backend_->cross_entropy(logits->tensor(), targets, grad_scale, losses_only->tensor(), nullptr);
      EXPECT_EQ(losses_only->values(), losses->values()) << "losses without dlogits";
      EXPECT_UNCHANGED(logits);

      auto losses_in_place = output({n});
      backend_->cross_entropy(logits->tensor(), targets, grad_scale, losses_in_place->tensor(),
                              logits->ptr());
      EXPECT_EQ(losses_in_place->values(), losses->values()) << "losses in place";
      EXPECT_EQ(logits->values(), dlogits->values()) << "dlogits in place";
      EXPECT_GUARDS(logits);
    }
  }
}

TEST_P(BackwardLinear, CrossEntropyIsBitwiseIndependentOfThreadCount) {
  const int64_t n = 50, vocab = 3001;
  std::vector<int32_t> targets(static_cast<size_t>(n));
  for (size_t t = 0; t < targets.size(); ++t) targets[t] = static_cast<int32_t>(t * 61 % vocab);
  auto logits = input(DType::F32, {n, vocab}, 0.05f, 8.0f);
  std::vector<float> results[2][2];
  for (const int threads : {1, 4}) {
    set_thread_count(threads);
    auto losses = output({n});
    auto dlogits = output({n, vocab});
    backend_->cross_entropy(logits->tensor(), targets, 1.0f, losses->tensor(), dlogits->ptr());
    results[threads == 1 ? 0 : 1][0] = losses->values();
    results[threads == 1 ? 0 : 1][1] = dlogits->values();
  }
  EXPECT_EQ(results[0][0], results[1][0]) << "losses";
  EXPECT_EQ(results[0][1], results[1][1]) << "dlogits";
}

TEST_P(BackwardLinear, CrossEntropyRejectsBadTargetsAndShapes) {
  auto logits = input(DType::F32, {2, 5});
  auto losses = output({2});
  auto dlogits = output({2, 5});
  const std::vector<int32_t> ok = {1, 4}, too_big = {1, 5}, three = {1, 2, 3};
  EXPECT_THROW(backend_->cross_entropy(logits->tensor(), too_big, 1.0f, losses->tensor(), dlogits->ptr()),
               Error);
  EXPECT_THROW(backend_->cross_entropy(logits->tensor(), three, 1.0f, losses->tensor(), dlogits->ptr()),
               Error);
  auto wrong_losses = output({3});
  EXPECT_THROW(backend_->cross_entropy(logits->tensor(), ok, 1.0f, wrong_losses->tensor(), nullptr), Error);
  auto wrong_dlogits = output({2, 6});
  EXPECT_THROW(backend_->cross_entropy(logits->tensor(), ok, 1.0f, losses->tensor(), wrong_dlogits->ptr()),
               Error);
  // dlogits shifted by one element over logits: neither in place nor disjoint.
  auto big = input(DType::F32, {3, 5});
  const Tensor shifted(big->tensor().as<float>() + 1, DType::F32, {2, 5});
  EXPECT_THROW(backend_->cross_entropy(big->tensor().slice_rows(0, 2), ok, 1.0f, losses->tensor(), &shifted),
               Error);
  EXPECT_UNCHANGED(logits);
  EXPECT_GUARDS(losses);
  EXPECT_GUARDS(dlogits);
}

// ---------------------------------------------------------------- sum_squares

TEST_P(BackwardLinear, SumSquaresMatchesReference) {
  for (const int64_t count : {0, 1, 13, 8191, 8193, 100003}) {
    SCOPED_TRACE("count=" + std::to_string(count));
    auto x = input(DType::F32, {count}, 0.05f, 3.0f);
    const double got = backend_->sum_squares(x->tensor());
    const double want = reference::sum_squares(x->tensor());
    EXPECT_LE(std::abs(got - want), kDoubleSum * want);
    EXPECT_UNCHANGED(x);
  }
}

TEST_P(BackwardLinear, SumSquaresIsBitwiseIndependentOfThreadCount) {
  auto x = input(DType::F32, {300007}, 0.05f, 3.0f);
  set_thread_count(1);
  const double one = backend_->sum_squares(x->tensor());
  set_thread_count(4);
  EXPECT_EQ(backend_->sum_squares(x->tensor()), one);
}

TEST_P(BackwardLinear, SumSquaresRejectsNonF32) {
  auto x = input(DType::BF16, {16});
  EXPECT_THROW(backend_->sum_squares(x->tensor()), Error);
}

// ---------------------------------------------------------------- adamw_step

TEST_P(BackwardLinear, AdamWStepsOfAHandExample) {
  auto param = buffer(DType::F32, {2});
  auto grad = buffer(DType::F32, {2});
  auto m = buffer(DType::F32, {2});
  auto v = buffer(DType::F32, {2});
  param->set(0, 1.0f);
  param->set(1, -0.5f);
  m->fill(0.0f);
  v->fill(0.0f);
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step + 1));
    grad->set(0, kHandGrads[step][0]);
    grad->set(1, kHandGrads[step][1]);
    Backend::AdamW hyper = kHandHyper;
    hyper.step = step + 1;
    hyper.grad_scale = 0.5f;
    backend_->adamw_step(param->tensor(), grad->tensor(), m->tensor(), v->tensor(), hyper);
    synchronize();  // before the reads below and the next step's writes of grad
    for (int64_t i = 0; i < 2; ++i) {
      EXPECT_NEAR(param->get(i), kHandParam[step][i], 1e-6 * std::abs(kHandParam[step][i]));
      EXPECT_NEAR(m->get(i), kHandM[step][i], 1e-6 * std::abs(kHandM[step][i]));
      EXPECT_NEAR(v->get(i), kHandV[step][i], 1e-6 * std::abs(kHandV[step][i]));
    }
  }
  EXPECT_GUARDS(param);
  EXPECT_GUARDS(m);
  EXPECT_GUARDS(v);
}

TEST_P(BackwardLinear, AdamWStepMatchesReference) {
  for (const int64_t count : {1, 13, 1000, 70001}) {
    for (const int64_t step : {1, 3, 1000}) {
      SCOPED_TRACE("count=" + std::to_string(count) + " step=" + std::to_string(step));
      auto param = input(DType::F32, {count});
      auto grad = input(DType::F32, {count}, 0.05f, 4.0f);
      auto m = input(DType::F32, {count}, 0.01f, 0.5f);
      auto v = input(DType::F32, {count}, 0.01f, 0.5f);
      for (int64_t i = 0; i < count; ++i) v->set(i, std::abs(v->get(i)));  // a second moment is >= 0
      const Backend::AdamW hyper{.lr = 0.05f, .weight_decay = 0.1f, .step = step, .grad_scale = 0.5f};
      const reference::AdamWState want =
          reference::adamw_step(param->tensor(), grad->tensor(), m->tensor(), v->tensor(), hyper);
      backend_->adamw_step(param->tensor(), grad->tensor(), m->tensor(), v->tensor(), hyper);
      EXPECT_TRUE(close_to_reference(param->values(), want.param, kF32)) << "param";
      EXPECT_TRUE(close_to_reference(m->values(), want.m, kF32)) << "m";
      EXPECT_TRUE(close_to_reference(v->values(), want.v, kF32)) << "v";
      EXPECT_GUARDS(param);
      EXPECT_GUARDS(m);
      EXPECT_GUARDS(v);
      EXPECT_UNCHANGED(grad);
    }
  }
}

TEST_P(BackwardLinear, AdamWStepIsBitwiseIndependentOfThreadCount) {
  const int64_t count = 100003;
  auto grad = input(DType::F32, {count});
  auto start = input(DType::F32, {count});
  std::vector<float> results[2];
  for (const int threads : {1, 4}) {
    set_thread_count(threads);
    auto param = buffer(DType::F32, {count});
    auto m = buffer(DType::F32, {count});
    auto v = buffer(DType::F32, {count});
    for (int64_t i = 0; i < count; ++i) param->set(i, start->get(i));
    m->fill(0.01f);
    v->fill(0.02f);
    backend_->adamw_step(param->tensor(), grad->tensor(), m->tensor(), v->tensor(),
                         Backend::AdamW{.step = 7});
    results[threads == 1 ? 0 : 1] = param->values();
  }
  EXPECT_EQ(results[0], results[1]);
}

TEST_P(BackwardLinear, AdamWStepRejectsBadShapesOverlapsAndSteps) {
  auto param = input(DType::F32, {16});
  auto grad = input(DType::F32, {16});
  auto m = input(DType::F32, {16});
  auto v = input(DType::F32, {16}, 0.05f, 0.1f);
  auto short_grad = input(DType::F32, {15});
  auto bf16_m = input(DType::BF16, {16});
  EXPECT_THROW(backend_->adamw_step(param->tensor(), short_grad->tensor(), m->tensor(), v->tensor(), {}),
               Error);
  EXPECT_THROW(backend_->adamw_step(param->tensor(), grad->tensor(), bf16_m->tensor(), v->tensor(), {}),
               Error);
  EXPECT_THROW(backend_->adamw_step(param->tensor(), grad->tensor(), m->tensor(), m->tensor(), {}), Error);
  EXPECT_THROW(backend_->adamw_step(param->tensor(), param->tensor(), m->tensor(), v->tensor(), {}), Error);
  EXPECT_THROW(backend_->adamw_step(param->tensor(), grad->tensor(), m->tensor(), v->tensor(), {.step = 0}),
               Error);
  EXPECT_UNCHANGED(param);
  EXPECT_UNCHANGED(m);
  EXPECT_UNCHANGED(v);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BackwardLinear, ::testing::ValuesIn(backends_under_test()),
                         backend_test_name);

}  // namespace
}  // namespace tokenmill::testing
