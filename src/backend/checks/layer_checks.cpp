#include "backend/checks/layer_checks.h"

#include <cmath>

#include "backend/checks/shape_checks.h"
#include "core/error.h"

namespace tokenmill::checks {

namespace {

// A per-column vector of a norm ([d], any dtype) with data.
void expect_vector(const char* op, const char* name, const Tensor& v, int64_t d) {
  if (v.numel() != d) fail("{}: {} must have {} elements, got {}", op, name, d, describe(v));
  expect_data(op, name, v);
}

}  // namespace

RowDims check_rows(const char* op, const Tensor& x, const Tensor& y) {
  expect_f32(op, "x", x);
  expect_f32(op, "y", y);
  expect_same_numel(op, "x", x, "y", y);
  expect_same_or_disjoint(op, "y", y, "x", x);
  const RowDims dims{x.rows(), x.cols()};
  if (y.cols() != dims.d)
    fail("{}: y is {} but x is {}: rows must have the same width", op, describe(y), describe(x));
  return dims;
}

RowDims check_norm(const char* op, const Tensor& x, const Tensor& weight, const Tensor* bias,
                   const Tensor& y) {
  const RowDims dims = check_rows(op, x, y);
  expect_vector(op, "weight", weight, dims.d);
  if (bias != nullptr) expect_vector(op, "bias", *bias, dims.d);
  return dims;
}

RowDims check_add_norm(const char* op, const Tensor& a, const Tensor& b, const Tensor& sum,
                       const Tensor& weight, const Tensor* bias, const Tensor& y) {
  check_binary(op, a, b, sum);
  const RowDims dims = check_norm(op, sum, weight, bias, y);
  expect_disjoint(op, {{"y", y}}, {{"a", a}, {"b", b}, {"sum", sum}});
  return dims;
}

RowDims check_norm_backward(const char* op, const Tensor& x, const Tensor& weight, const Tensor& dy,
                            const Tensor& dx, const Tensor& dweight, const Tensor* dbias) {
  expect_f32(op, {{"x", x}, {"dy", dy}, {"dx", dx}, {"dweight", dweight}});
  expect_like(op, {"dy", dy}, {"x", x});
  expect_like(op, {"dx", dx}, {"x", x});
  expect_like(op, {"dweight", dweight}, {"weight", weight}, false);
  expect_disjoint(op, {{"dx", dx}, {"dweight", dweight}}, {{"x", x}, {"weight", weight}, {"dy", dy}});
  if (dbias != nullptr) {
    expect_f32(op, {{"dbias", *dbias}});
    expect_like(op, {"dbias", *dbias}, {"weight", weight}, false);
    expect_disjoint(op, {{"dbias", *dbias}},
                    {{"x", x}, {"weight", weight}, {"dy", dy}, {"dx", dx}, {"dweight", dweight}});
  }
  const RowDims dims{x.rows(), x.cols()};
  expect_vector(op, "weight", weight, dims.d);
  return dims;
}

int64_t check_unary(const char* op, const Tensor& x, const Tensor& y) {
  expect_f32(op, "x", x);
  expect_f32(op, "y", y);
  expect_same_numel(op, "x", x, "y", y);
  expect_same_or_disjoint(op, "y", y, "x", x);
  return x.numel();
}

void check_softcap(float cap) {
  if (!(cap > 0.0f) || !std::isfinite(cap)) fail("softcap: the cap must be finite and > 0, got {}", cap);
}

void check_clamped_swiglu(float alpha, float limit) {
  if (!std::isfinite(alpha) || !(limit > 0.0f) || !std::isfinite(limit))
    fail("clamped_swiglu: alpha must be finite and the limit finite and > 0, got {} and {}", alpha, limit);
}

int64_t check_softcap_backward(float cap, const Tensor& y, const Tensor& dy, const Tensor& dx) {
  const char* op = "softcap_backward";
  check_softcap(cap);
  expect_f32(op, {{"y", y}, {"dy", dy}, {"dx", dx}});
  expect_same_numel(op, "dy", dy, "y", y);
  expect_same_numel(op, "dx", dx, "y", y);
  expect_same_or_disjoint(op, "dx", dx, "y", y);
  expect_same_or_disjoint(op, "dx", dx, "dy", dy);
  return y.numel();
}

int64_t check_binary(const char* op, const Tensor& a, const Tensor& b, const Tensor& y) {
  expect_f32(op, "a", a);
  expect_f32(op, "b", b);
  expect_f32(op, "y", y);
  expect_same_numel(op, "a", a, "y", y);
  expect_same_numel(op, "b", b, "y", y);
  expect_same_or_disjoint(op, "y", y, "a", a);
  expect_same_or_disjoint(op, "y", y, "b", b);
  return a.numel();
}

int64_t check_gelu_backward(const char* op, const Tensor& x, const Tensor& dy, const Tensor& dx) {
  expect_f32(op, {{"x", x}, {"dy", dy}, {"dx", dx}});
  expect_like(op, {"dy", dy}, {"x", x}, false);
  expect_like(op, {"dx", dx}, {"x", x}, false);
  expect_disjoint(op, {{"dx", dx}}, {{"x", x}, {"dy", dy}}, {&dy});
  return x.numel();
}

int64_t check_swiglu_backward(const char* op, const Tensor& gate, const Tensor& up, const Tensor& dy,
                              const Tensor& dgate, const Tensor& dup) {
  expect_f32(op, {{"gate", gate}, {"up", up}, {"dy", dy}, {"dgate", dgate}, {"dup", dup}});
  for (const Named& t : {Named{"up", up}, Named{"dy", dy}, Named{"dgate", dgate}, Named{"dup", dup}})
    expect_like(op, t, {"gate", gate}, false);
  expect_disjoint(op, {{"dgate", dgate}, {"dup", dup}}, {{"gate", gate}, {"up", up}, {"dy", dy}},
                  {&gate, &up, &dy});
  return gate.numel();
}

RopeDims check_rope(const char* op, const char* name, const Tensor& x, std::span<const int32_t> positions,
                    const Tensor& inv_freq, float magnitude) {
  if (!(magnitude > 0.0f) || !std::isfinite(magnitude))
    fail("{}: magnitude {} must be finite and > 0", op, magnitude);
  expect_f32(op, name, x);
  expect_rank(op, name, x, 3);
  expect_f32(op, "inv_freq", inv_freq);
  const RopeDims dims{x.dim(0), x.dim(1), x.dim(2), inv_freq.numel()};
  if (static_cast<int64_t>(positions.size()) != dims.n)
    fail("{}: {} positions for {} {}; need one per row", op, positions.size(), name, describe(x));
  if (2 * dims.half > dims.head_dim)
    fail("{}: inv_freq {} rotates {} elements but heads of {} {} have only {}", op, describe(inv_freq),
         2 * dims.half, name, describe(x), dims.head_dim);
  expect_disjoint(op, name, x, "inv_freq", inv_freq);
  return dims;
}

}  // namespace tokenmill::checks
