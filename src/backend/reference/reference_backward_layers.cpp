#include "backend/reference/reference_backward.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "backend/reference/reference_ops.h"
#include "core/error.h"

// The float64 reference backward of the layer ops: norms, activations, RoPE, attention.
// Each function is the chain rule of the forward in reference_ops.cpp written out per
// element; tests/backend/backward_layers_test.cpp checks every one against finite
// differences of that forward.
namespace tokenmill::reference {

namespace {

void expect_numel(const char* op, const Tensor& t, int64_t numel) {
  if (t.numel() != numel) fail("reference {}: {} should have {} elements", op, t.shape_string(), numel);
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

size_t at(int64_t i) { return static_cast<size_t>(i); }

// Checks a norm's shapes (x [rows, d], weight [d], dy like x) and sizes its gradients,
// the parameter ones zero.
NormGrads norm_grads(const char* op, const Tensor& x, const Tensor& weight, const Tensor& dy, bool bias) {
  expect_numel(op, weight, x.cols());
  expect_numel(op, dy, x.numel());
  NormGrads grads;
  grads.dx.resize(at(x.numel()));
  grads.dweight.assign(at(x.cols()), 0.0);
  if (bias) grads.dbias.assign(at(x.cols()), 0.0);
  return grads;
}

}  // namespace

// y = x r w with r = (mean(x^2) + eps)^-1/2, per row. With g = w dy:
//   dx_i = r g_i - x_i r^3 / d * sum_j g_j x_j,   dweight_i = sum_rows dy_i x_i r.
NormGrads rms_norm_backward(const Tensor& x, const Tensor& weight, float eps, const Tensor& dy) {
  const int64_t rows = x.rows(), d = x.cols();
  NormGrads grads = norm_grads("rms_norm_backward", x, weight, dy, false);
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t base = row * d;
    double sum_sq = 0, sum_gx = 0;
    for (int64_t i = 0; i < d; ++i) {
      sum_sq += element(x, base + i) * element(x, base + i);
      sum_gx += element(weight, i) * element(dy, base + i) * element(x, base + i);
    }
    const double r = 1.0 / std::sqrt(sum_sq / static_cast<double>(d) + static_cast<double>(eps));
    for (int64_t i = 0; i < d; ++i) {
      const double xi = element(x, base + i), dyi = element(dy, base + i);
      grads.dx[at(base + i)] =
          r * element(weight, i) * dyi - xi * r * r * r / static_cast<double>(d) * sum_gx;
      grads.dweight[at(i)] += dyi * xi * r;
    }
  }
  return grads;
}

// y = xhat w + b with xhat = (x - mean) r, r = (var + eps)^-1/2 (biased variance). With
// g = w dy:  dx = r (g - mean(g) - xhat mean(g xhat)),  dweight = sum dy xhat,  dbias = sum dy.
NormGrads layer_norm_backward(const Tensor& x, const Tensor& weight, float eps, const Tensor& dy) {
  const int64_t rows = x.rows(), d = x.cols();
  NormGrads grads = norm_grads("layer_norm_backward", x, weight, dy, true);
  std::vector<double> xhat(at(d));
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t base = row * d;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) mean += element(x, base + i);
    mean /= static_cast<double>(d);
    for (int64_t i = 0; i < d; ++i) var += (element(x, base + i) - mean) * (element(x, base + i) - mean);
    var /= static_cast<double>(d);
    const double r = 1.0 / std::sqrt(var + static_cast<double>(eps));
    double mean_g = 0, mean_gx = 0;
    for (int64_t i = 0; i < d; ++i) {
      xhat[at(i)] = (element(x, base + i) - mean) * r;
      const double g = element(weight, i) * element(dy, base + i);
      mean_g += g;
      mean_gx += g * xhat[at(i)];
    }
    mean_g /= static_cast<double>(d);
    mean_gx /= static_cast<double>(d);
    for (int64_t i = 0; i < d; ++i) {
      const double dyi = element(dy, base + i);
      grads.dx[at(base + i)] = r * (element(weight, i) * dyi - mean_g - xhat[at(i)] * mean_gx);
      grads.dweight[at(i)] += dyi * xhat[at(i)];
      grads.dbias[at(i)] += dyi;
    }
  }
  return grads;
}

// Tanh: gelu = x/2 (1 + t), t = tanh(u), u = c (x + a x^3):
//   gelu' = (1 + t)/2 + x/2 (1 - t^2) u' = s + 2 x s (1 - s) u',  u' = c (1 + 3 a x^2),
// with s = sigmoid(2u) = (1 + t)/2, the form without cancellation where t is near -1 (it
// keeps the tiny, nonzero derivative of a large negative x).
// Erf: gelu = x Phi(x):  gelu' = Phi(x) + x phi(x), phi the standard normal density,
// Phi(x) = erfc(-x / sqrt 2) / 2 (again without cancellation for negative x).
std::vector<double> gelu_backward(const Tensor& x, GeluForm form, const Tensor& dy) {
  expect_numel("gelu_backward", dy, x.numel());
  std::vector<double> dx(at(x.numel()));
  const double c = std::sqrt(2.0 / std::numbers::pi), a = 0.044715;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = element(x, i);
    double derivative;
    if (form == GeluForm::Tanh) {
      const double s = 1.0 / (1.0 + std::exp(-2.0 * c * (v + a * v * v * v)));
      derivative = s + 2.0 * v * s * (1.0 - s) * c * (1.0 + 3.0 * a * v * v);
    } else {
      derivative = 0.5 * std::erfc(-v / std::numbers::sqrt2) +
                   v * std::exp(-0.5 * v * v) / std::sqrt(2.0 * std::numbers::pi);
    }
    dx[at(i)] = element(dy, i) * derivative;
  }
  return dx;
}

// y = silu(g) u with silu(g) = g s(g):  silu'(g) = s(g) (1 + g (1 - s(g))).
GatedGrads swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy) {
  expect_numel("swiglu_backward", up, gate.numel());
  expect_numel("swiglu_backward", dy, gate.numel());
  GatedGrads grads;
  grads.dgate.resize(at(gate.numel()));
  grads.dup.resize(at(gate.numel()));
  for (int64_t i = 0; i < gate.numel(); ++i) {
    const double g = element(gate, i), s = sigmoid(g), dyi = element(dy, i);
    grads.dgate[at(i)] = dyi * element(up, i) * s * (1.0 + g * (1.0 - s));
    grads.dup[at(i)] = dyi * g * s;
  }
  return grads;
}

// y = gelu_tanh(g) u:  dgate = dy u gelu_tanh'(g) (gelu_backward's), dup = dy gelu_tanh(g).
GatedGrads geglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy) {
  expect_numel("geglu_backward", up, gate.numel());
  expect_numel("geglu_backward", dy, gate.numel());
  GatedGrads grads;
  grads.dgate = gelu_backward(gate, GeluForm::Tanh, dy);
  grads.dup = gelu(gate, GeluForm::Tanh);
  for (int64_t i = 0; i < gate.numel(); ++i) {
    grads.dgate[at(i)] *= element(up, i);
    grads.dup[at(i)] *= element(dy, i);
  }
  return grads;
}

// y = c tanh(x / c):  dy/dx = 1 - tanh^2(x / c) = 1 - (y / c)^2.
std::vector<double> softcap_backward(const Tensor& y, float cap, const Tensor& dy) {
  expect_numel("softcap_backward", dy, y.numel());
  std::vector<double> dx(at(y.numel()));
  for (int64_t i = 0; i < y.numel(); ++i) {
    const double ratio = element(y, i) / static_cast<double>(cap);
    dx[at(i)] = element(dy, i) * (1.0 - ratio * ratio);
  }
  return dx;
}

// RoPE multiplies each pair by m R(angle); its transpose is m R(-angle), the forward at the
// negated positions.
std::vector<double> rope_backward(const Tensor& dx, std::span<const int32_t> positions,
                                  const Tensor& inv_freq, RopeLayout layout, float magnitude) {
  std::vector<int32_t> negated(positions.size());
  std::transform(positions.begin(), positions.end(), negated.begin(), [](int32_t p) {
    if (p == INT32_MIN) fail("reference rope_backward: position {} cannot be negated", p);
    return -p;
  });
  return rope(dx, negated, inv_freq, layout, magnitude);
}

// Per query t and head h (kv head g), over keys first <= p <= t (first = the window's start):
//   S_p = scale q_t . k_p (soft cap c: S_p = c tanh(scale q_t . k_p / c)),  P = softmax(S),
//   out_t = sum_p P_p v_p,  dP_p = dout_t . v_p,  dS_p = P_p (dP_p - sum_j P_j dP_j) S'_p
//   (S'_p = scale, or with the cap scale (1 - (S_p / c)^2)),
//   dq_t += sum_p dS_p k_p,  dk_p += dS_p q_t,  dv_p += P_p dout_t.
AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
                                  AttentionScores scores) {
  const int64_t n = q.dim(0), heads = q.dim(1), hd = q.dim(2), kv_heads = k.dim(1);
  if (kv_heads < 1 || heads % kv_heads != 0 || k.dim(0) != n || k.dim(2) != hd)
    fail("reference attention_backward: bad shapes");
  expect_numel("attention_backward", v, k.numel());
  expect_numel("attention_backward", dout, q.numel());
  const int64_t group = heads / kv_heads;
  AttentionGrads grads;
  grads.dq.assign(at(q.numel()), 0.0);
  grads.dk.assign(at(k.numel()), 0.0);
  grads.dv.assign(at(v.numel()), 0.0);
  const auto scale = static_cast<double>(scores.scale), cap = static_cast<double>(scores.softcap);
  std::vector<double> p_row, dp_row, slope;
  for (int64_t t = 0; t < n; ++t) {
    const int64_t first = scores.first_position(t);
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t g = h / group, qi = (t * heads + h) * hd;
      p_row.assign(at(t + 1), 0.0);  // positions before `first` keep probability 0
      dp_row.assign(at(t + 1), 0.0);
      slope.assign(at(t + 1), scale);
      double max_score = -INFINITY;
      for (int64_t p = first; p <= t; ++p) {
        const int64_t ki = (p * kv_heads + g) * hd;
        double dot = 0, dot_v = 0;
        for (int64_t i = 0; i < hd; ++i) {
          dot += element(q, qi + i) * element(k, ki + i);
          dot_v += element(dout, qi + i) * element(v, ki + i);
        }
        double score = scale * dot;
        if (cap > 0) {
          score = cap * std::tanh(score / cap);
          slope[at(p)] = scale * (1.0 - (score / cap) * (score / cap));
        }
        p_row[at(p)] = score;
        dp_row[at(p)] = dot_v;
        max_score = std::max(max_score, score);
      }
      double sum = 0;
      for (int64_t p = first; p <= t; ++p) sum += (p_row[at(p)] = std::exp(p_row[at(p)] - max_score));
      double expected_dp = 0;
      for (int64_t p = first; p <= t; ++p) expected_dp += (p_row[at(p)] /= sum) * dp_row[at(p)];
      for (int64_t p = first; p <= t; ++p) {
        const int64_t ki = (p * kv_heads + g) * hd;
        const double ds = p_row[at(p)] * (dp_row[at(p)] - expected_dp) * slope[at(p)];
        for (int64_t i = 0; i < hd; ++i) {
          grads.dq[at(qi + i)] += ds * element(k, ki + i);
          grads.dk[at(ki + i)] += ds * element(q, qi + i);
          grads.dv[at(ki + i)] += p_row[at(p)] * element(dout, qi + i);
        }
      }
    }
  }
  return grads;
}

}  // namespace tokenmill::reference
