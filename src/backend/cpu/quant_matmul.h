// Matmul with a ggml-quantized weight matrix on the CPU: the driver around the kernels of
// quant_kernels.h (activation quantisation into a thread-local panel, then the products
// split between threads). See Backend::matmul for the contract.
#pragma once

#include <span>

#include "backend/cpu/kernels.h"
#include "backend/cpu/quant_kernels.h"

namespace tokenmill::cpu {

// y = x . w^T (+ bias) for a quantized a.w_dtype; `a` is shape-checked and n, k, m > 0.
// Weight types the kernels have no SIMD path for go through the scalar reference
// (quant::vec_dot_row); types that are not weight formats throw Error.
void quantized_matmul(const QuantKernelTable& kernels, const MatmulArgs& a);

// Decode steps: the products a[i] (each as quantized_matmul's argument, with at most
// kQuantDecodeTokens tokens and a weight type of kernels.has_simd) in one parallel pass over
// all their rows, each output computed as quantized_matmul computes it.
inline constexpr int64_t kQuantDecodeTokens = 4;
void quantized_decode_many(const QuantKernelTable& kernels, std::span<const MatmulArgs> a);

}  // namespace tokenmill::cpu
