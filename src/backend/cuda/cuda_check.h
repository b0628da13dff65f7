// Every CUDA runtime and cuBLAS(Lt) call goes through TM_CUDA_CHECK / TM_CUBLAS_CHECK, and
// every kernel launch is followed by TM_CUDA_CHECK_LAUNCH(): a failure becomes
// tokenmill::Error naming the call, the file and line, the CUDA error and a hint of what
// to do ("cudaErrorNoKernelImageForDevice ... rebuild with CMAKE_CUDA_ARCHITECTURES=...").
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "core/dtype.h"

namespace tokenmill::cuda {

void check(cudaError_t status, const char* call, const char* file, int line);
void check(cublasStatus_t status, const char* call, const char* file, int line);

// What to do about `status`, or "" when there is nothing better to say than its name.
const char* hint_for(cudaError_t status);

// Throws Error: "`op`: <dtype> tensors are not supported by the CUDA backend ...". (.cu files
// call this instead of fail(): nvcc 13 cannot compile fmt 9, so they never include it.)
[[noreturn]] void fail_unsupported_dtype(const char* op, DType dtype);

}  // namespace tokenmill::cuda

#define TM_CUDA_CHECK(call) ::tokenmill::cuda::check((call), #call, __FILE__, __LINE__)
#define TM_CUBLAS_CHECK(call) ::tokenmill::cuda::check((call), #call, __FILE__, __LINE__)
// After a <<<...>>> launch: a bad configuration or a missing kernel image shows up here.
#define TM_CUDA_CHECK_LAUNCH() \
  ::tokenmill::cuda::check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
