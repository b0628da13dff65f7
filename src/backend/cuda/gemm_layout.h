// How a row-major matrix product is handed to cuBLASLt, which is column-major: plain host
// arithmetic, tested on the CPU (tests/backend/cuda/gemm_layout_test.cpp).
//
// A row-major [r, c] matrix is, byte for byte, the column-major c x r matrix (its
// transpose) with leading dimension c. So the row-major product Y[rows, cols] = P . Q is
// computed as the column-major Y^T (cols x rows) = Q^T . P^T: cuBLASLt's A is Q and its B is
// P, each read transposed (op T) when it is stored transposed in row-major terms.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tokenmill::cuda {

// D (m x n, leading dimension ldd) = op(A) (m x k) . op(B) (k x n), all column-major; A is
// stored as lda-strided columns of k x m when trans_a (else m x k), B of n x k when trans_b
// (else k x n).
struct GemmLayout {
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldd = 0;
  bool trans_a = false, trans_b = false;

  // The stored (before op) column-major shapes of A and B, as cublasLtMatrixLayoutCreate wants them.
  int64_t a_rows() const { return trans_a ? k : m; }
  int64_t a_cols() const { return trans_a ? m : k; }
  int64_t b_rows() const { return trans_b ? n : k; }
  int64_t b_cols() const { return trans_b ? k : n; }
};

// Y[rows, cols] = P[rows, inner] . Q[inner, cols] for contiguous row-major Y, where P is
// stored as [rows, inner], or as [inner, rows] when p_transposed; Q as [inner, cols], or as
// [cols, inner] when q_transposed. Examples (backend.h's matmul and its backward):
//   y[n, m]   = x[n, k] . w[m, k]^T   row_major_product(n, m, k, false, true)
//   dx[n, k]  = dy[n, m] . w[m, k]     row_major_product(n, k, m, false, false)
//   dw[m, k] += dy[n, m]^T . x[n, k]   row_major_product(m, k, n, true, false)
GemmLayout row_major_product(int64_t rows, int64_t cols, int64_t inner, bool p_transposed, bool q_transposed);

// `layout` with every leading dimension rounded up so that each column of A and B (elements
// of `element_bytes`) and of D (f32) starts 16 bytes after the previous one: the layout of
// 16-byte-aligned copies of the operands, for products cuBLASLt has no algorithm for as
// they are (odd leading dimensions or misaligned addresses).
GemmLayout padded_layout(const GemmLayout& layout, size_t element_bytes);

// The alignment cuBLASLt may assume for a buffer at `address`: the largest power of two
// dividing it, at most 256 (a null address counts as 256).
uint32_t address_alignment(const void* address);

}  // namespace tokenmill::cuda
