// Argument checks of the linear ops (embedding, matmul, convert and their backward), shared
// by every backend so that all of them refuse the same calls with the same words. Each
// throws Error (core/error.h) naming the op and the argument, and returns the dimensions
// the op needs.
#pragma once

#include <cstdint>
#include <span>

#include "backend/backend.h"
#include "core/tensor.h"

namespace tokenmill::checks {

// embedding(table [vocab, d] any dtype, ids [n], out [n, d] f32); every id in [0, vocab).
struct EmbeddingDims {
  int64_t vocab = 0, d = 0, n = 0;
};
EmbeddingDims check_embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out);

// combine_rows(x [m, d] f32, rows and scales [n k], y [n, d] f32 disjoint from x); every row
// in [0, m). Returns k.
struct CombineDims {
  int64_t m = 0, d = 0, n = 0, k = 0;
};
CombineDims check_combine_rows(const Tensor& x, std::span<const int32_t> rows, std::span<const float> scales,
                               const Tensor& y);

// y[n, m] = x[n, k] . w[m, k]^T (+ bias[m]): x, y f32 (x may have any rank: its leading
// dimensions are the n rows), w rank 2 of any dtype, bias m elements of f32, bf16 or f16,
// y disjoint from every input.
struct MatmulDims {
  int64_t n = 0, k = 0, m = 0;
};
MatmulDims check_matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y);

// matmul_shared: every target as check_matmul (w and y not null), and no target's y over
// another target's y, w or bias (a backend may run them at once).
void check_matmul_shared(const Tensor& x, std::span<const Backend::MatmulTarget> targets);

// matmul_many: every product as check_matmul (x, w and y not null), and no product's y over
// another product's x, w, bias or y.
void check_matmul_many(std::span<const Backend::MatmulProduct> products);

// add_lora(x [n, k] f32, segments, y [n, m] f32): every segment's a [rank, k] and b [m, rank]
// f32 with 1 <= rank <= Backend::kMaxLoraRank, rows >= 1, the segments in ascending row
// order without overlap inside [0, n); y over no x, a or b. Returns the dimensions, the rows
// the segments cover, their largest rank and their multiply-adds (sum of rows rank (k + m)).
struct LoraDims {
  int64_t n = 0, k = 0, m = 0, covered_rows = 0, max_rank = 0, multiply_adds = 0;
};
LoraDims check_add_lora(const Tensor& x, std::span<const Backend::LoraSegment> segments, const Tensor& y);

// matmul_backward: w rank 2 and not quantized, x [n, k], dy [n, m], dx [n, k], dw [m, k],
// db [m] all f32 (the optional outputs when not null), no output over an input or another
// output.
MatmulDims check_matmul_backward(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor* dx,
                                 const Tensor* dw, const Tensor* db);

// embedding_backward: dtable [vocab, d] f32, dout [n, d] f32 with n = ids.size(), disjoint,
// every id in [0, vocab).
EmbeddingDims check_embedding_backward(std::span<const int32_t> ids, const Tensor& dout,
                                       const Tensor& dtable);

// convert: x f32, y f32/bf16/f16 with as many elements, disjoint. Returns the element count.
int64_t check_convert(const Tensor& x, const Tensor& y);

}  // namespace tokenmill::checks
