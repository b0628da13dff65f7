// Argument checks shared by every backend (cpu/, cuda/), so that all of them refuse the same
// calls with the same words: each throws Error (core/error.h) with a message that names the
// op, the argument and its shape ("rms_norm: x must be f32, got bf16[2, 3]").
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/tensor.h"

namespace tokenmill::checks {

// A tensor with the name the messages give it.
struct Named {
  Named(const char* n, const Tensor& t) : name(n), tensor(&t) {}
  Named(const char* n, const Tensor* t) : name(n), tensor(t) {}  // null: absent (skipped)

  const char* name;
  const Tensor* tensor;
};

std::string describe(const Tensor& t);

// Data present unless the tensor is empty.
void expect_data(const char* op, const char* name, const Tensor& t);
// F32 with data.
void expect_f32(const char* op, const char* name, const Tensor& t);
void expect_f32(const char* op, std::initializer_list<Named> tensors);
// F32 with data, seen as [rows, cols] (leading dimensions folded into rows).
void expect_f32_matrix(const char* op, const char* name, const Tensor& t, int64_t rows, int64_t cols);
// F32 with data and `count` elements.
void expect_f32_count(const char* op, const char* name, const Tensor& t, int64_t count);
void expect_rank(const char* op, const char* name, const Tensor& t, int rank);
void expect_same_numel(const char* op, const char* a_name, const Tensor& a, const char* b_name,
                       const Tensor& b);
// The element count and (when `same_width`) the last dimension of `like`.
void expect_like(const char* op, const Named& t, const Named& like, bool same_width = true);

// True when a and b share a byte.
bool overlaps(const Tensor& a, const Tensor& b);
void expect_disjoint(const char* op, const char* out_name, const Tensor& out, const char* in_name,
                     const Tensor& in);
// Elementwise outputs may be the input itself (in place) but not a shifted view of it.
void expect_same_or_disjoint(const char* op, const char* out_name, const Tensor& out, const char* in_name,
                             const Tensor& in);
// No output overlaps an input or another output, except an output that is exactly (same
// data) an input listed in `may_be` (in place).
void expect_disjoint(const char* op, std::initializer_list<Named> outputs,
                     std::initializer_list<Named> inputs, std::initializer_list<const Tensor*> may_be = {});

}  // namespace tokenmill::checks
