// DevicePool: the CUDA backend's caching device allocator, built on the driver's
// stream-ordered memory pool (cudaMallocAsync): a freed block goes back to the pool, not to
// the driver (release threshold = infinite), so steady-state steps never call cudaMalloc or
// cudaFree; allocation and release are ordered on the backend's stream, so a buffer freed
// while a kernel still reads it is reused only after that kernel.
//
// Out of memory is an Error that says what was asked, what is free on the GPU, what the
// pool holds, and what to change.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace tokenmill::cuda {

class DevicePool;

// One allocation, returned to the pool (stream-ordered) when destroyed.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = static_cast<DeviceBuffer&&>(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { release(); }

  void* data() const { return data_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  friend class DevicePool;
  DeviceBuffer(void* data, size_t bytes, cudaStream_t stream) : data_(data), bytes_(bytes), stream_(stream) {}
  void release() noexcept;

  void* data_ = nullptr;
  size_t bytes_ = 0;
  cudaStream_t stream_ = nullptr;
};

struct DevicePoolStats {
  uint64_t allocated = 0;       // bytes in live buffers
  uint64_t reserved = 0;        // bytes the pool holds from the driver (allocated + cached)
  uint64_t peak_allocated = 0;  // high-water marks since the process started (the pool is the device default)
  uint64_t peak_reserved = 0;
};

// Throws the out-of-memory Error for a failed allocation of `bytes` (named `what`) on
// `device`: what is free on the GPU, what the default pool holds, what to change.
[[noreturn]] void fail_out_of_memory(int device, size_t bytes, const char* what);

class DevicePool {
 public:
  // The pool of `device`, ordered on `stream` (both outlive the pool).
  DevicePool(int device, cudaStream_t stream);

  // `bytes` of device memory (a zero-byte request gives an empty buffer). `what` names the
  // buffer in the out-of-memory error.
  DeviceBuffer allocate(size_t bytes, const char* what);

  DevicePoolStats stats() const;

 private:
  int device_;
  cudaStream_t stream_;
  cudaMemPool_t pool_ = nullptr;
};

}  // namespace tokenmill::cuda
