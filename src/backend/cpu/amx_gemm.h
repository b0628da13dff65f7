// The AMX GEMM: f32 activations times bf16 weights on Intel AMX tiles (Sapphire Rapids and
// later), the prefill regime of matmul where the CPU has AMX-BF16 (CpuIsa::Amx).
//
// AMX multiplies bf16 by bf16 and sums in f32. Each f32 activation is split into two bf16
// values, x = hi + lo with hi = bf16(x) and lo = bf16(x - hi) (both rounded to nearest even),
// and y = hi . w + lo . w. That keeps 16 significant bits of x, not f32's 24:
// |x - hi - lo| <= 2^-16 |x| (about 2^-17 at worst in practice), where one bf16 pass (what
// PyTorch's bf16 models multiply) keeps 8. The products of two bf16 values are exact in f32,
// and the sums run in f32 in a fixed order (the thread count never changes a bit). Against
// the float64 reference the conformance suite's matmul shapes err by up to 2.8e-6 of the
// output's largest magnitude (the f32 GEMM: 8e-7), inside its f32 tolerance of 1e-5.
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
