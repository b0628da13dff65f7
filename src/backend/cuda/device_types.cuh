// Device-side element types: the storage types of backend.h's dtypes (f32, bf16, f16) as
// CUDA types, their conversions to and from f32 (round to nearest even, as core/dtype.h),
// and a host-side switch that instantiates a launcher for a runtime DType.
//
// .cu files must not include fmt (core/error.h): nvcc 13 rejects fmt 9's constexpr code.
// Errors from .cu files go through the plain functions below and cuda_check.h.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <utility>

#include "backend/cuda/cuda_check.h"
#include "core/dtype.h"

namespace tokenmill::cuda {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}

// Calls f(T{}) with T the storage type of `dtype` (f32, bf16 or f16); Error for any other
// dtype, naming `op`.
template <class F>
void with_storage_type(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::F32: std::forward<F>(f)(float{}); return;
    case DType::BF16: std::forward<F>(f)(__nv_bfloat16{}); return;
    case DType::F16: std::forward<F>(f)(__half{}); return;
    default: fail_unsupported_dtype(op, dtype);
  }
}

}  // namespace tokenmill::cuda
