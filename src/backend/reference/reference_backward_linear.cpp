#include "backend/reference/reference_backward.h"

#include <algorithm>
#include <cmath>

#include "backend/reference/reference_ops.h"
#include "core/error.h"

namespace tokenmill::reference {

namespace {

void expect_numel(const char* op, const char* name, const Tensor& t, int64_t numel) {
  if (t.numel() != numel)
    fail("reference {}: {} is {} but should have {} elements", op, name, t.shape_string(), numel);
}

}  // namespace

MatmulGrads matmul_backward(const Tensor& x, const Tensor& w, const Tensor& dy) {
  const int64_t m = w.dim(0), k = w.dim(1), n = x.rows();
  expect_numel("matmul_backward", "x", x, n * k);
  expect_numel("matmul_backward", "dy", dy, n * m);
  MatmulGrads g;
  g.dx.assign(static_cast<size_t>(n * k), 0.0);
  g.dw.assign(static_cast<size_t>(m * k), 0.0);
  g.db.assign(static_cast<size_t>(m), 0.0);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = 0; r < m; ++r) {
      const double d = element(dy, t * m + r);
      g.db[static_cast<size_t>(r)] += d;
      for (int64_t i = 0; i < k; ++i) {
        g.dx[static_cast<size_t>(t * k + i)] += d * element(w, r * k + i);
        g.dw[static_cast<size_t>(r * k + i)] += d * element(x, t * k + i);
      }
    }
  }
  return g;
}

std::vector<double> embedding_backward(std::span<const int32_t> ids, const Tensor& dout, int64_t vocab) {
  const int64_t n = static_cast<int64_t>(ids.size()), d = dout.cols();
  expect_numel("embedding_backward", "dout", dout, n * d);
  std::vector<double> dtable(static_cast<size_t>(vocab * d), 0.0);
  for (int64_t t = 0; t < n; ++t) {
    const int32_t id = ids[static_cast<size_t>(t)];
    if (id < 0 || id >= vocab) fail("reference embedding_backward: id {} outside [0, {})", id, vocab);
    for (int64_t j = 0; j < d; ++j) dtable[static_cast<size_t>(id * d + j)] += element(dout, t * d + j);
  }
  return dtable;
}

CrossEntropy cross_entropy(const Tensor& logits, std::span<const int32_t> targets, double grad_scale) {
  const int64_t n = logits.rows(), vocab = logits.cols();
  if (static_cast<int64_t>(targets.size()) != n)
    fail("reference cross_entropy: {} targets for logits {}", targets.size(), logits.shape_string());
  CrossEntropy ce;
  ce.losses.assign(static_cast<size_t>(n), 0.0);
  ce.dlogits.assign(static_cast<size_t>(n * vocab), 0.0);
  for (int64_t t = 0; t < n; ++t) {
    const int32_t target = targets[static_cast<size_t>(t)];
    if (target >= vocab) fail("reference cross_entropy: target {} outside [0, {})", target, vocab);
    if (target < 0) continue;
    double max = element(logits, t * vocab);
    for (int64_t j = 1; j < vocab; ++j) max = std::max(max, element(logits, t * vocab + j));
    double sum = 0;
    for (int64_t j = 0; j < vocab; ++j) sum += std::exp(element(logits, t * vocab + j) - max);
    ce.losses[static_cast<size_t>(t)] = max + std::log(sum) - element(logits, t * vocab + target);
    for (int64_t j = 0; j < vocab; ++j) {
      const double p = std::exp(element(logits, t * vocab + j) - max) / sum;
      ce.dlogits[static_cast<size_t>(t * vocab + j)] = grad_scale * (p - (j == target ? 1.0 : 0.0));
    }
  }
  return ce;
}

double sum_squares(const Tensor& x) {
  double sum = 0;
  for (int64_t i = 0; i < x.numel(); ++i) sum += element(x, i) * element(x, i);
  return sum;
}

AdamWState adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                      const Backend::AdamW& hyper) {
  const int64_t count = param.numel();
  expect_numel("adamw_step", "grad", grad, count);
  expect_numel("adamw_step", "m", m, count);
  expect_numel("adamw_step", "v", v, count);
  if (hyper.step < 1) fail("reference adamw_step: step {} must be >= 1", hyper.step);
  const double lr = hyper.lr, beta1 = hyper.beta1, beta2 = hyper.beta2, eps = hyper.eps;
  const double bias_correction1 = 1.0 - std::pow(beta1, static_cast<double>(hyper.step));
  const double bias_correction2 = 1.0 - std::pow(beta2, static_cast<double>(hyper.step));
  AdamWState s;
  s.param.resize(static_cast<size_t>(count));
  s.m.resize(static_cast<size_t>(count));
  s.v.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const auto u = static_cast<size_t>(i);
    const double g = static_cast<double>(hyper.grad_scale) * element(grad, i);
    double p = element(param, i);
    p -= lr * static_cast<double>(hyper.weight_decay) * p;
    s.m[u] = beta1 * element(m, i) + (1.0 - beta1) * g;
    s.v[u] = beta2 * element(v, i) + (1.0 - beta2) * g * g;
    p -= lr * (s.m[u] / bias_correction1) / (std::sqrt(s.v[u] / bias_correction2) + eps);
    s.param[u] = p;
  }
  return s;
}

}  // namespace tokenmill::reference
