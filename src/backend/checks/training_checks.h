// Argument checks of the training ops (cross_entropy, sum_squares, adamw_step), shared by
// every backend so that all of them refuse the same calls with the same words. Each throws
// Error (core/error.h) naming the op and the argument, and returns what the op needs.
#pragma once

#include <cstdint>
#include <span>

#include "backend/backend.h"
#include "core/tensor.h"

namespace tokenmill::checks {

// cross_entropy: logits [rows, vocab] f32, one target per row (each < vocab; < 0 ignores
// the row), losses [rows] f32, dlogits (when not null) [rows, vocab] f32, logits itself or
// disjoint from it; losses disjoint from both.
struct CrossEntropyDims {
  int64_t rows = 0, vocab = 0;
};
CrossEntropyDims check_cross_entropy(const Tensor& logits, std::span<const int32_t> targets,
                                     const Tensor& losses, const Tensor* dlogits);

// sum_squares: x f32. Returns the element count.
int64_t check_sum_squares(const Tensor& x);

// adamw_step: param, grad, m, v f32 of one element count; param, m and v disjoint from each
// other and from grad; step >= 1. Returns the element count.
int64_t check_adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                         const Backend::AdamW& hyper);

}  // namespace tokenmill::checks
