#include "backend/checks/linear_checks.h"

#include <algorithm>

#include "backend/checks/shape_checks.h"
#include "core/checked_math.h"
#include "core/error.h"

namespace tokenmill::checks {

namespace {

void expect_ids_in_vocabulary(const char* op, std::span<const int32_t> ids, int64_t vocab) {
  for (size_t t = 0; t < ids.size(); ++t)
    if (ids[t] < 0 || ids[t] >= vocab)
      fail("{}: token id {} at position {} is outside the vocabulary [0, {})", op, ids[t], t, vocab);
}

}  // namespace

EmbeddingDims check_embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) {
  const char* op = "embedding";
  expect_rank(op, "table", table, 2);
  expect_data(op, "table", table);
  expect_f32(op, "out", out);
  const EmbeddingDims dims{.vocab = table.dim(0), .d = table.dim(1), .n = static_cast<int64_t>(ids.size())};
  if (out.rows() != dims.n || out.cols() != dims.d)
    fail("{}: out is {} but {} ids of a {} table need [{}, {}]", op, describe(out), dims.n, describe(table),
         dims.n, dims.d);
  expect_disjoint(op, "out", out, "table", table);
  expect_ids_in_vocabulary(op, ids, dims.vocab);
  return dims;
}

CombineDims check_combine_rows(const Tensor& x, std::span<const int32_t> rows, std::span<const float> scales,
                               const Tensor& y) {
  const char* op = "combine_rows";
  expect_f32(op, "x", x);
  expect_f32(op, "y", y);
  expect_rank(op, "x", x, 2);
  expect_rank(op, "y", y, 2);
  const CombineDims dims{.m = x.dim(0), .d = x.dim(1), .n = y.dim(0), .k = 0};
  if (y.dim(1) != dims.d)
    fail("{}: y is {} but x is {}: their rows must have one length", op, describe(y), describe(x));
  if (dims.n == 0 || rows.empty() || rows.size() % static_cast<size_t>(dims.n) != 0)
    fail("{}: {} rows for the {} rows of y; a positive multiple of them is needed", op, rows.size(), dims.n);
  if (scales.size() != rows.size()) fail("{}: {} scales for {} rows", op, scales.size(), rows.size());
  expect_disjoint(op, "y", y, "x", x);
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i] < 0 || rows[i] >= dims.m)
      fail("{}: row {} at index {} is outside x's [0, {})", op, rows[i], i, dims.m);
  return {dims.m, dims.d, dims.n, static_cast<int64_t>(rows.size()) / dims.n};
}

MatmulDims check_matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) {
  const char* op = "matmul";
  expect_f32(op, "x", x);
  expect_rank(op, "w", w, 2);
  expect_data(op, "w", w);
  expect_f32(op, "y", y);
  const MatmulDims dims{.n = x.rows(), .k = w.dim(1), .m = w.dim(0)};
  if (x.cols() != dims.k)
    fail("{}: x is {} but w is {}: x's last dimension must be w's k = {}", op, describe(x), describe(w),
         dims.k);
  if (y.rows() != dims.n || y.cols() != dims.m)
    fail("{}: y is {} but x {} . w {}^T is [{}, {}]", op, describe(y), describe(x), describe(w), dims.n,
         dims.m);
  expect_disjoint(op, "y", y, "x", x);
  expect_disjoint(op, "y", y, "w", w);
  if (bias != nullptr) {
    expect_disjoint(op, "y", y, "bias", *bias);
    if (bias->numel() != dims.m) fail("{}: bias must have {} elements, got {}", op, dims.m, describe(*bias));
    if (is_quantized(bias->dtype)) fail("{}: bias must be f32, bf16 or f16, got {}", op, describe(*bias));
    expect_data(op, "bias", *bias);
  }
  return dims;
}

void check_matmul_many(std::span<const Backend::MatmulProduct> products) {
  const char* op = "matmul_many";
  for (const Backend::MatmulProduct& p : products) {
    if (p.x == nullptr || p.w == nullptr || p.y == nullptr) fail("{}: a product without x, w or y", op);
    check_matmul(*p.x, *p.w, p.bias, *p.y);
  }
  for (const Backend::MatmulProduct& p : products)
    for (const Backend::MatmulProduct& other : products) {
      if (&p == &other) continue;
      expect_disjoint(op, "y", *p.y, "another product's y", *other.y);
      expect_disjoint(op, "y", *p.y, "another product's x", *other.x);
      expect_disjoint(op, "y", *p.y, "another product's w", *other.w);
      if (other.bias != nullptr) expect_disjoint(op, "y", *p.y, "another product's bias", *other.bias);
    }
}

void check_matmul_shared(const Tensor& x, std::span<const Backend::MatmulTarget> targets) {
  const char* op = "matmul_shared";
  for (const Backend::MatmulTarget& t : targets) {
    if (t.w == nullptr || t.y == nullptr) fail("{}: a target without w or y", op);
    check_matmul(x, *t.w, t.bias, *t.y);
  }
  for (const Backend::MatmulTarget& t : targets) {
    for (const Backend::MatmulTarget& other : targets) {
      if (&t == &other) continue;
      expect_disjoint(op, "y", *t.y, "another target's y", *other.y);
      expect_disjoint(op, "y", *t.y, "another target's w", *other.w);
      if (other.bias != nullptr) expect_disjoint(op, "y", *t.y, "another target's bias", *other.bias);
    }
  }
}

LoraDims check_add_lora(const Tensor& x, std::span<const Backend::LoraSegment> segments, const Tensor& y) {
  const char* op = "add_lora";
  expect_f32(op, "x", x);
  expect_f32(op, "y", y);
  expect_rank(op, "x", x, 2);
  expect_rank(op, "y", y, 2);
  LoraDims dims{.n = x.dim(0), .k = x.dim(1), .m = y.dim(1)};
  if (y.dim(0) != dims.n)
    fail("{}: y is {} but x is {}: they must have one row per token", op, describe(y), describe(x));
  expect_disjoint(op, "y", y, "x", x);
  int64_t end_of_previous = 0;
  const char* work = "add_lora's multiply-adds";  // sums of rows rank (k + m), checked for overflow
  uint64_t multiply_adds = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    const Backend::LoraSegment& s = segments[i];
    if (s.a == nullptr || s.b == nullptr) fail("{}: segment {} has no a or no b", op, i);
    if (s.rows < 1 || s.first_row < 0 || s.first_row > dims.n - s.rows)
      fail(
          "{}: segment {} covers {} rows from row {}; it needs at least one row, all inside the {} rows of x",
          op, i, s.rows, s.first_row, dims.n);
    if (s.first_row < end_of_previous)
      fail(
          "{}: segment {} starts at row {}, before the end of segment {} (row {}); segments must be in "
          "ascending row order without overlap",
          op, i, s.first_row, i - 1, end_of_previous);
    end_of_previous = s.first_row + s.rows;
    for (const Named& t : {Named("a", s.a), Named("b", s.b)}) {
      if (t.tensor->dtype != DType::F32 || t.tensor->rank != 2)
        fail("{}: segment {}'s {} must be an f32 matrix, got {}", op, i, t.name, describe(*t.tensor));
      expect_data(op, t.name, *t.tensor);
    }
    const int64_t rank = s.a->dim(0);
    if (rank < 1 || rank > Backend::kMaxLoraRank)
      fail("{}: segment {}'s a is {}: its rank {} must be in [1, {}]", op, i, describe(*s.a), rank,
           Backend::kMaxLoraRank);
    if (s.a->dim(1) != dims.k)
      fail("{}: segment {}'s a is {} but x is {}: a must be [rank, {}]", op, i, describe(*s.a), describe(x),
           dims.k);
    if (s.b->dim(0) != dims.m || s.b->dim(1) != rank)
      fail("{}: segment {}'s b is {} but must be [{}, {}] (y's width, a's rank)", op, i, describe(*s.b),
           dims.m, rank);
    expect_disjoint(op, "y", y, "a", *s.a);
    expect_disjoint(op, "y", y, "b", *s.b);
    dims.covered_rows += s.rows;
    dims.max_rank = std::max(dims.max_rank, rank);
    const uint64_t per_row =
        checked_mul(static_cast<uint64_t>(rank),
                    checked_add(static_cast<uint64_t>(dims.k), static_cast<uint64_t>(dims.m), work), work);
    multiply_adds =
        checked_add(multiply_adds, checked_mul(per_row, static_cast<uint64_t>(s.rows), work), work);
  }
  dims.multiply_adds = checked_to_int64(multiply_adds, work);
  return dims;
}

MatmulDims check_matmul_backward(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor* dx,
                                 const Tensor* dw, const Tensor* db) {
  const char* op = "matmul_backward";
  expect_rank(op, "w", w, 2);
  if (is_quantized(w.dtype))
    fail("{}: w is {}; training needs f32, bf16 or f16 weights (dequantize the model first)", op,
         w.shape_string());
  expect_data(op, "w", w);
  const MatmulDims dims{.n = x.rows(), .k = w.dim(1), .m = w.dim(0)};
  expect_f32_matrix(op, "x", x, dims.n, dims.k);
  expect_f32_matrix(op, "dy", dy, dims.n, dims.m);
  if (dx != nullptr) expect_f32_matrix(op, "dx", *dx, dims.n, dims.k);
  if (dw != nullptr) expect_f32_matrix(op, "dw", *dw, dims.m, dims.k);
  if (db != nullptr) expect_f32_count(op, "db", *db, dims.m);
  expect_disjoint(op, {{"dx", dx}, {"dw", dw}, {"db", db}}, {{"x", x}, {"w", w}, {"dy", dy}});
  return dims;
}

EmbeddingDims check_embedding_backward(std::span<const int32_t> ids, const Tensor& dout,
                                       const Tensor& dtable) {
  const char* op = "embedding_backward";
  expect_rank(op, "dtable", dtable, 2);
  const EmbeddingDims dims{.vocab = dtable.dim(0), .d = dtable.dim(1), .n = static_cast<int64_t>(ids.size())};
  expect_f32_matrix(op, "dtable", dtable, dims.vocab, dims.d);
  expect_f32_matrix(op, "dout", dout, dims.n, dims.d);
  expect_disjoint(op, {{"dtable", dtable}}, {{"dout", dout}});
  expect_ids_in_vocabulary(op, ids, dims.vocab);
  return dims;
}

int64_t check_convert(const Tensor& x, const Tensor& y) {
  const char* op = "convert";
  expect_f32(op, "x", x);
  expect_data(op, "y", y);
  if (is_quantized(y.dtype)) fail("{}: y is {}; convert writes f32, bf16 or f16", op, describe(y));
  expect_same_numel(op, "x", x, "y", y);
  expect_disjoint(op, "y", y, "x", x);
  return x.numel();
}

}  // namespace tokenmill::checks
