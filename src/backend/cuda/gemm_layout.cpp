#include "backend/cuda/gemm_layout.h"

namespace tokenmill::cuda {

GemmLayout row_major_product(int64_t rows, int64_t cols, int64_t inner, bool p_transposed,
                             bool q_transposed) {
  GemmLayout g;
  g.m = cols;
  g.n = rows;
  g.k = inner;
  g.trans_a = q_transposed;  // A = Q: column-major cols x inner (ld cols), or inner x cols (ld inner)
  g.lda = q_transposed ? inner : cols;
  g.trans_b = p_transposed;  // B = P: column-major inner x rows (ld inner), or rows x inner (ld rows)
  g.ldb = p_transposed ? rows : inner;
  g.ldd = cols;
  return g;
}

namespace {

// n rounded up to a whole number of 16-byte groups of `element_bytes` elements.
int64_t padded(int64_t n, size_t element_bytes) {
  const auto group = static_cast<int64_t>(element_bytes >= 16 ? 1 : 16 / element_bytes);
  return (n + group - 1) / group * group;
}

}  // namespace

GemmLayout padded_layout(const GemmLayout& layout, size_t element_bytes) {
  GemmLayout p = layout;
  p.lda = padded(layout.a_rows(), element_bytes);
  p.ldb = padded(layout.b_rows(), element_bytes);
  p.ldd = padded(layout.m, sizeof(float));
  return p;
}

uint32_t address_alignment(const void* address) {
  constexpr uint32_t kMax = 256;
  const auto bits = reinterpret_cast<uintptr_t>(address);
  if (bits % kMax == 0) return kMax;
  return static_cast<uint32_t>(bits & (~bits + 1));  // the lowest set bit
}

}  // namespace tokenmill::cuda
