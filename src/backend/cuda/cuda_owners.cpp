#include "backend/cuda/cuda_owners.h"

#include "backend/cuda/cuda_check.h"

namespace tokenmill::cuda {

void StreamRelease::operator()(cudaStream_t stream) const noexcept {
  cudaStreamSynchronize(stream);  // buffers freed on it are returned in stream order first
  cudaStreamDestroy(stream);
}

void CublasLtRelease::operator()(cublasLtHandle_t handle) const noexcept { cublasLtDestroy(handle); }

void EventRelease::operator()(cudaEvent_t event) const noexcept {
  cudaEventSynchronize(event);
  cudaEventDestroy(event);
}

void PinnedRelease::operator()(char* memory) const noexcept { cudaFreeHost(memory); }

StreamOwner make_stream() {
  cudaStream_t stream = nullptr;
  TM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return StreamOwner(stream);
}

CublasLtOwner make_cublaslt() {
  cublasLtHandle_t handle = nullptr;
  TM_CUBLAS_CHECK(cublasLtCreate(&handle));
  return CublasLtOwner(handle);
}

EventOwner make_event() {
  cudaEvent_t event = nullptr;
  TM_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return EventOwner(event);
}

PinnedOwner make_pinned(size_t bytes) {
  void* memory = nullptr;
  TM_CUDA_CHECK(cudaMallocHost(&memory, bytes));
  return PinnedOwner(static_cast<char*>(memory));
}

}  // namespace tokenmill::cuda
