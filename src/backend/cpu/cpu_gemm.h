// The CPU backend's packed GEMM driver (the prefill regime of matmul, and the backward
// products): x is packed once into token tiles, then (weight panel, token range) tasks run in
// parallel. The order of every sum is fixed by the blocking, so the result is the same bits
// whatever the thread count.
#pragma once

#include <span>

#include "backend/cpu/kernels.h"

namespace tokenmill::cpu {

// y for the already checked `a` (any n >= 1, k >= 1, m >= 1, and what `kernels` take).
void gemm(const GemmKernels& kernels, const MatmulArgs& a);

// As gemm() for each of `products` (at least one), which share x (the same x, n, k and
// layout): x is packed once and all their panels share one parallel pass. Each y is
// gemm()'s, bit for bit.
void gemm_shared(const GemmKernels& kernels, std::span<const MatmulArgs> products);

}  // namespace tokenmill::cpu
