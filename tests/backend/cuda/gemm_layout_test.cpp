// gemm_layout.h: the row-major products of matmul and its backward, handed to a plain
// column-major GEMM exactly as cuBLASLt reads its arguments, give the row-major results;
// and the buffer alignment cuBLASLt is told.
#include "backend/cuda/gemm_layout.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace tokenmill::cuda {
namespace {

// A row-major [rows, cols] matrix of small random integers (every product and sum exact).
std::vector<double> random_matrix(std::mt19937_64& rng, int64_t rows, int64_t cols) {
  std::uniform_int_distribution<int> value(-9, 9);
  std::vector<double> m(static_cast<size_t>(rows * cols));
  for (double& v : m) v = value(rng);
  return m;
}

// t[c, r] = a[r, c].
std::vector<double> transposed(const std::vector<double>& a, int64_t rows, int64_t cols) {
  std::vector<double> t(a.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      t[static_cast<size_t>(c * rows + r)] = a[static_cast<size_t>(r * cols + c)];
  return t;
}

// Row-major p[rows, inner] . q[inner, cols].
std::vector<double> row_major(const std::vector<double>& p, const std::vector<double>& q, int64_t rows,
                              int64_t cols, int64_t inner) {
  std::vector<double> y(static_cast<size_t>(rows * cols), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t i = 0; i < inner; ++i)
        y[static_cast<size_t>(r * cols + c)] +=
            p[static_cast<size_t>(r * inner + i)] * q[static_cast<size_t>(i * cols + c)];
  return y;
}

// cuBLASLt's D = op(A) . op(B) on the raw buffers, column-major, as documented.
std::vector<double> column_major_gemm(const GemmLayout& g, const std::vector<double>& a,
                                      const std::vector<double>& b) {
  EXPECT_GE(g.lda, g.a_rows());
  EXPECT_GE(g.ldb, g.b_rows());
  EXPECT_GE(g.ldd, g.m);
  EXPECT_EQ(static_cast<size_t>(g.lda * g.a_cols()), a.size()) << "A's buffer is exactly its matrix";
  EXPECT_EQ(static_cast<size_t>(g.ldb * g.b_cols()), b.size()) << "B's buffer is exactly its matrix";
  const auto op_a = [&](int64_t i, int64_t l) {
    return g.trans_a ? a[static_cast<size_t>(l + i * g.lda)] : a[static_cast<size_t>(i + l * g.lda)];
  };
  const auto op_b = [&](int64_t l, int64_t j) {
    return g.trans_b ? b[static_cast<size_t>(j + l * g.ldb)] : b[static_cast<size_t>(l + j * g.ldb)];
  };
  std::vector<double> d(static_cast<size_t>(g.ldd * g.n), 0.0);
  for (int64_t j = 0; j < g.n; ++j)
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t l = 0; l < g.k; ++l) d[static_cast<size_t>(i + j * g.ldd)] += op_a(i, l) * op_b(l, j);
  return d;
}

// P [rows, inner] and Q [inner, cols] stored as `row_major_product` is told (transposed or
// not), handed to the column-major GEMM as A = Q and B = P: D must be P . Q, row-major.
::testing::AssertionResult computes_product(std::mt19937_64& rng, int64_t rows, int64_t cols, int64_t inner,
                                            bool p_transposed, bool q_transposed) {
  const std::vector<double> p = random_matrix(rng, rows, inner), q = random_matrix(rng, inner, cols);
  const GemmLayout g = row_major_product(rows, cols, inner, p_transposed, q_transposed);
  const std::vector<double> d = column_major_gemm(g, q_transposed ? transposed(q, inner, cols) : q,
                                                  p_transposed ? transposed(p, rows, inner) : p);
  if (d == row_major(p, q, rows, cols, inner)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "rows=" << rows << " cols=" << cols << " inner=" << inner << " p_transposed=" << p_transposed
         << " q_transposed=" << q_transposed;
}

TEST(GemmLayout, EveryTransposeOfOddShapesComputesTheRowMajorProduct) {
  std::mt19937_64 rng(1);
  const int64_t sizes[][3] = {{1, 1, 1}, {3, 7, 5}, {2, 1, 9}, {1, 6, 4}, {13, 2, 3}, {7, 17, 31}};
  for (const auto& [rows, cols, inner] : sizes)
    for (const bool p_transposed : {false, true})
      for (const bool q_transposed : {false, true})
        EXPECT_TRUE(computes_product(rng, rows, cols, inner, p_transposed, q_transposed));
}

// The three products of matmul and its backward (gemm_layout.h's examples), n = 3, k = 5,
// m = 7: cuBLASLt's m, n, k and transposes.
TEST(GemmLayout, MatmulAndItsBackwardMapAsDocumented) {
  const GemmLayout forward = row_major_product(3, 7, 5, false, true);  // y = x . w^T: A = w, B = x
  EXPECT_EQ((std::vector<int64_t>{forward.m, forward.n, forward.k, forward.lda, forward.ldb, forward.ldd}),
            (std::vector<int64_t>{7, 3, 5, 5, 5, 7}));
  EXPECT_TRUE(forward.trans_a);
  EXPECT_FALSE(forward.trans_b);
  const GemmLayout dx = row_major_product(3, 5, 7, false, false);  // dx = dy . w: A = w, B = dy
  EXPECT_EQ((std::vector<int64_t>{dx.m, dx.n, dx.k, dx.lda, dx.ldb, dx.ldd}),
            (std::vector<int64_t>{5, 3, 7, 5, 7, 5}));
  EXPECT_FALSE(dx.trans_a);
  EXPECT_FALSE(dx.trans_b);
  const GemmLayout dw = row_major_product(7, 5, 3, true, false);  // dw = dy^T . x: A = x, B = dy
  EXPECT_EQ((std::vector<int64_t>{dw.m, dw.n, dw.k, dw.lda, dw.ldb, dw.ldd}),
            (std::vector<int64_t>{5, 7, 3, 5, 7, 5}));
  EXPECT_FALSE(dw.trans_a);
  EXPECT_TRUE(dw.trans_b);
}

// `cols` columns of `rows` values, ld `from_ld`, copied to columns ld `to_ld` (the
// cudaMemcpy2DAsync the engine issues; the padding is garbage).
std::vector<double> restaged(const std::vector<double>& m, int64_t rows, int64_t cols, int64_t from_ld,
                             int64_t to_ld) {
  std::vector<double> out(static_cast<size_t>(to_ld * cols), -12345.0);
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < rows; ++r)
      out[static_cast<size_t>(c * to_ld + r)] = m[static_cast<size_t>(c * from_ld + r)];
  return out;
}

// Every column of the padded layout starts 16 bytes after a 16-byte boundary, and the
// product over restaged copies, read back column by column, is the original product.
TEST(GemmLayout, PaddedLayoutAlignsEveryColumnAndKeepsTheProduct) {
  std::mt19937_64 rng(2);
  for (const size_t element_bytes : {size_t{2}, size_t{4}}) {
    for (const bool p_transposed : {false, true}) {
      for (const bool q_transposed : {false, true}) {
        const int64_t rows = 3, cols = 7, inner = 5;
        const GemmLayout g = row_major_product(rows, cols, inner, p_transposed, q_transposed);
        const GemmLayout p = padded_layout(g, element_bytes);
        EXPECT_TRUE(p.m == g.m && p.n == g.n && p.k == g.k && p.trans_a == g.trans_a &&
                    p.trans_b == g.trans_b)
            << "only the leading dimensions change";
        EXPECT_EQ(p.lda * static_cast<int64_t>(element_bytes) % 16, 0);
        EXPECT_EQ(p.ldb * static_cast<int64_t>(element_bytes) % 16, 0);
        EXPECT_EQ(p.ldd * 4 % 16, 0);
        EXPECT_GE(p.lda, g.a_rows());
        EXPECT_LT(p.lda - g.a_rows(), 16 / static_cast<int64_t>(element_bytes));
        const std::vector<double> pm = random_matrix(rng, rows, inner), qm = random_matrix(rng, inner, cols);
        const std::vector<double> a = q_transposed ? transposed(qm, inner, cols) : qm;
        const std::vector<double> b = p_transposed ? transposed(pm, rows, inner) : pm;
        const std::vector<double> d = column_major_gemm(p, restaged(a, g.a_rows(), g.a_cols(), g.lda, p.lda),
                                                        restaged(b, g.b_rows(), g.b_cols(), g.ldb, p.ldb));
        EXPECT_EQ(restaged(d, g.m, g.n, p.ldd, g.ldd), row_major(pm, qm, rows, cols, inner));
      }
    }
  }
}

TEST(GemmLayout, AddressAlignmentIsTheLargestPowerOfTwoUpTo256) {
  alignas(256) static unsigned char buffer[1024];
  EXPECT_EQ(address_alignment(buffer), 256u);
  EXPECT_EQ(address_alignment(buffer + 512), 256u);
  EXPECT_EQ(address_alignment(buffer + 1), 1u);
  EXPECT_EQ(address_alignment(buffer + 2), 2u);
  EXPECT_EQ(address_alignment(buffer + 6), 2u);
  EXPECT_EQ(address_alignment(buffer + 4), 4u);
  EXPECT_EQ(address_alignment(buffer + 64 + 4), 4u);  // an f32 one element past 64 bytes
  EXPECT_EQ(address_alignment(buffer + 64 + 2), 2u);  // a bf16 one element past 64 bytes
  EXPECT_EQ(address_alignment(buffer + 64), 64u);
  EXPECT_EQ(address_alignment(buffer + 128), 128u);
  EXPECT_EQ(address_alignment(buffer + 384), 128u);
  EXPECT_EQ(address_alignment(nullptr), 256u);
}

}  // namespace
}  // namespace tokenmill::cuda
