#include "backend/cuda/cuda_memory.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_pool.h"

namespace tokenmill::cuda {

void* CudaMemory::allocate(size_t bytes) {
  TM_CUDA_CHECK(cudaSetDevice(device_));
  void* memory = nullptr;
  const cudaError_t status = cudaMalloc(&memory, bytes == 0 ? 1 : bytes);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    fail_out_of_memory(device_, bytes, "a model buffer (weights, KV cache or activations)");
  }
  TM_CUDA_CHECK(status);
  return memory;
}

void CudaMemory::free(void* memory) noexcept {
  // cudaFree waits for the device; buffers go when a model or cache does, never inside a step.
  cudaFree(memory);
}

void CudaMemory::copy_from_host(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  TM_CUDA_CHECK(cudaSetDevice(device_));
  // Ops queued on the backends' own streams may still write or read `dst` (training zeroes
  // its parameter buffers by a kernel, then uploads the initial values): they finish first.
  TM_CUDA_CHECK(cudaDeviceSynchronize());
  TM_CUDA_CHECK(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice));
  // From pageable memory cudaMemcpy may return before the DMA lands; ops on other streams
  // must not race it.
  TM_CUDA_CHECK(cudaDeviceSynchronize());
}

void CudaMemory::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  TM_CUDA_CHECK(cudaSetDevice(device_));
  TM_CUDA_CHECK(cudaDeviceSynchronize());  // the ops that wrote `src` run on the backends' own streams
  TM_CUDA_CHECK(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost));
}

uint64_t CudaMemory::available() const {
  TM_CUDA_CHECK(cudaSetDevice(device_));
  size_t free = 0, total = 0;
  TM_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return free;
}

CudaMemory& device_memory(int device) {
  static std::mutex mutex;
  static auto* memories = new std::map<int, CudaMemory>();  // never destroyed: outlives every tensor
  const std::lock_guard lock(mutex);
  return memories->try_emplace(device, device).first->second;
}

}  // namespace tokenmill::cuda
