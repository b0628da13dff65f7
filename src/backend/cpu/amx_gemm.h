// The AMX GEMM: f32 activations times bf16 weights on Intel AMX tiles (Sapphire Rapids and
// later), the prefill regime of matmul where the CPU has AMX-BF16 (CpuIsa::Amx).
//
// AMX multiplies bf16 by bf16 and sums in f32. So that the f32 activations keep their
// precision, each is split into two bf16 values, x = hi + lo with hi = bf16(x) and
// lo = bf16(x - hi) (both rounded to nearest even), and y = hi . w + lo . w: the split leaves
// |x - hi - lo| <= 2^-18 |x|, the products of two bf16 values are exact in f32, and the sums
// run in f32 in a fixed order (the thread count never changes a bit). The result agrees with
// the f32 GEMM to f32 rounding, not bit for bit.
#pragma once

#include "backend/cpu/kernels.h"

namespace tokenmill::cpu {

// Whether the AMX GEMM computes `a`: bf16 weights, neither operand stored transposed.
inline bool amx_gemm_applies(const MatmulArgs& a) {
  return a.w_dtype == DType::BF16 && !a.x_transposed && !a.w_transposed;
}

// Its kernels for cpu_gemm.cpp's driver. Call only where cpu_supports(CpuIsa::Amx) (the
// kernels are AMX and AVX-512 code, and Linux must have granted the process the tile state).
const GemmKernels& amx_gemm_kernels();

}  // namespace tokenmill::cpu
