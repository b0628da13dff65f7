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

uint32_t address_alignment(const void* address) {
  constexpr uint32_t kMax = 256;
  const auto bits = reinterpret_cast<uintptr_t>(address);
  if (bits % kMax == 0) return kMax;
  return static_cast<uint32_t>(bits & (~bits + 1));  // the lowest set bit
}

}  // namespace tokenmill::cuda
