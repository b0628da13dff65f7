// Launchers of the norm kernels (backend.h: rms_norm, layer_norm in norm_kernels.cu, their
// backward in norm_backward_kernels.cu): x, y, dy, dx are f32 device arrays [rows, d]; weight
// and bias are device arrays [d] of f32, bf16 or f16 (`*_dtype`). Arguments are checked by
// the caller (backend/checks/layer_checks.h). Forward outputs may be x itself (in place) when
// there is no residual add.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace tokenmill::cuda {

// The rows a forward norm reads: x, or (delta not null) sum = x + delta, which the kernel
// writes (the residual add of add_rms_norm / add_layer_norm; sum may be x, y is disjoint).
struct NormRows {
  const float* x = nullptr;
  const float* delta = nullptr;
  float* sum = nullptr;
};

void launch_rms_norm(const NormRows& in, const void* weight, DType weight_dtype, float eps, int64_t rows,
                     int64_t d, float* y, cudaStream_t stream);
void launch_layer_norm(const NormRows& in, const void* weight, DType weight_dtype, const void* bias,
                       DType bias_dtype, float eps, int64_t rows, int64_t d, float* y, cudaStream_t stream);

// The backward: dx overwritten (dx += the gradient when `accumulate_dx`), dweight (and dbias)
// += their sums over rows, deterministically.
// `scratch` is a device array of norm_backward_scratch_doubles(rows, d, grads) doubles
// (layer_geometry.h; grads = 1 for rms_norm, 2 for layer_norm).
void launch_rms_norm_backward(const float* x, const void* weight, DType weight_dtype, float eps,
                              const float* dy, int64_t rows, int64_t d, bool accumulate_dx, float* dx,
                              float* dweight, double* scratch, cudaStream_t stream);
void launch_layer_norm_backward(const float* x, const void* weight, DType weight_dtype, float eps,
                                const float* dy, int64_t rows, int64_t d, bool accumulate_dx, float* dx,
                                float* dweight, float* dbias, double* scratch, cudaStream_t stream);

}  // namespace tokenmill::cuda
