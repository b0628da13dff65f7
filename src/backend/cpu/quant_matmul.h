// Matmul with a ggml-quantized weight matrix on the CPU: the driver around the kernels of
// quant_kernels.h (activation quantisation into a thread-local panel, then the products
// split between threads). See Backend::matmul for the contract.
#pragma once

#include "backend/cpu/kernels.h"
#include "backend/cpu/quant_kernels.h"

namespace tokenmill::cpu {

// y = x . w^T (+ bias) for a quantized a.w_dtype; `a` is shape-checked and n, k, m > 0.
// Weight types the kernels have no SIMD path for go through the scalar reference
// (quant::vec_dot_row); types that are not weight formats throw Error.
void quantized_matmul(const QuantKernelTable& kernels, const MatmulArgs& a);

}  // namespace tokenmill::cpu
