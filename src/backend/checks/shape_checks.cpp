#include "backend/checks/shape_checks.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"

namespace tokenmill::checks {

std::string describe(const Tensor& t) { return t.shape_string(); }

void expect_data(const char* op, const char* name, const Tensor& t) {
  if (t.data == nullptr && t.numel() > 0) fail("{}: {} ({}) has no data", op, name, describe(t));
}

void expect_f32(const char* op, const char* name, const Tensor& t) {
  if (t.dtype != DType::F32) fail("{}: {} must be f32, got {}", op, name, describe(t));
  expect_data(op, name, t);
}

void expect_f32(const char* op, std::initializer_list<Named> tensors) {
  for (const Named& t : tensors)
    if (t.tensor != nullptr) expect_f32(op, t.name, *t.tensor);
}

void expect_f32_matrix(const char* op, const char* name, const Tensor& t, int64_t rows, int64_t cols) {
  expect_f32(op, name, t);
  if (t.rows() != rows || t.cols() != cols)
    fail("{}: {} is {} but must be [{}, {}]", op, name, describe(t), rows, cols);
}

void expect_f32_count(const char* op, const char* name, const Tensor& t, int64_t count) {
  expect_f32(op, name, t);
  if (t.numel() != count) fail("{}: {} is {} but must have {} elements", op, name, describe(t), count);
}

void expect_rank(const char* op, const char* name, const Tensor& t, int rank) {
  if (t.rank != rank) fail("{}: {} must have rank {}, got {}", op, name, rank, describe(t));
}

void expect_same_numel(const char* op, const char* a_name, const Tensor& a, const char* b_name,
                       const Tensor& b) {
  if (a.numel() != b.numel())
    fail("{}: {} is {} but {} is {}; they must have the same number of elements", op, a_name, describe(a),
         b_name, describe(b));
}

void expect_like(const char* op, const Named& t, const Named& like, bool same_width) {
  const Tensor &a = *t.tensor, &b = *like.tensor;
  if (a.numel() != b.numel() || (same_width && a.cols() != b.cols()))
    fail("{}: {} is {} but must have the shape of {} {}", op, t.name, describe(a), like.name, describe(b));
}

bool overlaps(const Tensor& a, const Tensor& b) {
  const auto a0 = reinterpret_cast<uintptr_t>(a.data);
  const auto b0 = reinterpret_cast<uintptr_t>(b.data);
  return a.nbytes() > 0 && b.nbytes() > 0 && a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

void expect_disjoint(const char* op, const char* out_name, const Tensor& out, const char* in_name,
                     const Tensor& in) {
  if (overlaps(out, in))
    fail("{}: output {} overlaps input {}; give the output its own buffer", op, out_name, in_name);
}

void expect_same_or_disjoint(const char* op, const char* out_name, const Tensor& out, const char* in_name,
                             const Tensor& in) {
  if (out.data == in.data) return;
  expect_disjoint(op, out_name, out, in_name, in);
}

void expect_disjoint(const char* op, std::initializer_list<Named> outputs,
                     std::initializer_list<Named> inputs, std::initializer_list<const Tensor*> may_be) {
  for (const Named* out = outputs.begin(); out != outputs.end(); ++out) {
    if (out->tensor == nullptr) continue;
    for (const Named& in : inputs) {
      if (in.tensor == nullptr) continue;
      const bool in_place = out->tensor->data == in.tensor->data &&
                            std::find(may_be.begin(), may_be.end(), in.tensor) != may_be.end();
      if (!in_place) expect_disjoint(op, out->name, *out->tensor, in.name, *in.tensor);
    }
    for (const Named* other = outputs.begin(); other != out; ++other)
      if (other->tensor != nullptr && overlaps(*out->tensor, *other->tensor))
        fail("{}: outputs {} and {} overlap; give each its own buffer", op, other->name, out->name);
  }
}

}  // namespace tokenmill::checks
