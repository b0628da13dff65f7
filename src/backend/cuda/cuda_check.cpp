#include "backend/cuda/cuda_check.h"

#include "core/error.h"

namespace tokenmill::cuda {

const char* hint_for(cudaError_t status) {
  switch (status) {
    case cudaErrorNoDevice:
      return "no CUDA GPU is visible: check nvidia-smi, CUDA_VISIBLE_DEVICES, and inside a container run "
             "with --gpus all";
    case cudaErrorInsufficientDriver:
      return "the NVIDIA driver is older than this build's CUDA runtime: upgrade the driver "
             "(`tokenmill doctor` says which version is needed)";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      return "this binary has no kernels for this GPU's architecture: rebuild with "
             "-DCMAKE_CUDA_ARCHITECTURES=<your GPU's sm, e.g. 90>";
    case cudaErrorMemoryAllocation:
      return "the GPU is out of memory: lower the batch, the context or --kv-cache-memory, or free the "
             "GPU (nvidia-smi shows who holds it)";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
      return "a kernel touched memory it does not own (a tokenmill bug: please report it with the command "
             "line); the CUDA context is now unusable, restart the process";
    case cudaErrorDevicesUnavailable:
      return "the GPU is in exclusive-process mode and another process holds it";
    default: return "";
  }
}

void check(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  const char* hint = hint_for(status);
  fail("CUDA error {} ({}) in {} at {}:{}{}{}", cudaGetErrorName(status), cudaGetErrorString(status), call,
       file, line, *hint ? ": " : "", hint);
}

void check(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  fail("cuBLAS error {} in {} at {}:{}{}", cublasLtGetStatusName(status), call, file, line,
       status == CUBLAS_STATUS_NOT_SUPPORTED
           ? ": no cuBLASLt algorithm supports this shape, dtype and alignment"
           : "");
}

void fail_unsupported_dtype(const char* op, DType dtype) {
  fail("{}: {} tensors are not supported by the CUDA backend (f32, bf16 and f16 are)", op, dtype_name(dtype));
}

}  // namespace tokenmill::cuda
