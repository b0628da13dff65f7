// CudaMemory: the CUDA backend's DeviceMemory (core/device_memory.h): long-lived buffers
// (weights, KV caches, step activations) from cudaMalloc. One object per GPU lives as long as
// the process, so tensors placed in it may outlive any backend object that used them.
// Copies are device-wide synchronous: a copy to the host waits for every op queued before
// it (on any stream), a copy from the host has landed before any op queued after it.
#pragma once

#include "core/device_memory.h"

namespace tokenmill::cuda {

class CudaMemory final : public DeviceMemory {
 public:
  explicit CudaMemory(int device) : device_(device) {}

  bool is_host() const override { return false; }
  void* allocate(size_t bytes) override;
  void free(void* memory) noexcept override;
  void copy_from_host(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  // The GPU's free memory as the driver reports it (cudaMemGetInfo).
  uint64_t available() const override;

 private:
  int device_;
};

// GPU `device`'s memory (made on first use, never destroyed).
CudaMemory& device_memory(int device);

}  // namespace tokenmill::cuda
