#include "backend/cuda/device_pool.h"

#include <cstdint>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "core/error.h"

namespace tokenmill::cuda {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

uint64_t pool_attribute(cudaMemPool_t pool, cudaMemPoolAttr attribute) {
  uint64_t value = 0;
  TM_CUDA_CHECK(cudaMemPoolGetAttribute(pool, attribute, &value));
  return value;
}

}  // namespace

void fail_out_of_memory(int device, size_t bytes, const char* what) {
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  cudaMemPool_t pool = nullptr;
  uint64_t reserved = 0, used = 0;
  if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess) {
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved);
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used);
  }
  cudaGetLastError();
  fail(
      "CUDA out of memory allocating {} ({:.1f} MiB) on GPU {}: {:.1f} MiB of {:.1f} MiB free; tokenmill's "
      "scratch pool holds {:.1f} MiB ({:.1f} MiB in use). Lower the batch size, --max-batch-tokens, the "
      "context "
      "or --kv-cache-memory, use a smaller model, or free the GPU (nvidia-smi shows who holds it)",
      what, static_cast<double>(bytes) / kMiB, device, static_cast<double>(free_bytes) / kMiB,
      static_cast<double>(total_bytes) / kMiB, static_cast<double>(reserved) / kMiB,
      static_cast<double>(used) / kMiB);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    stream_ = other.stream_;
  }
  return *this;
}

void DeviceBuffer::release() noexcept {
  // A failure here means the context is already broken; the next checked call reports it.
  if (data_ != nullptr) cudaFreeAsync(data_, stream_);
  data_ = nullptr;
  bytes_ = 0;
}

DevicePool::DevicePool(int device, cudaStream_t stream) : device_(device), stream_(stream) {
  TM_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool_, device_));
  uint64_t keep_everything = UINT64_MAX;  // cache freed blocks instead of returning them at each sync
  TM_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep_everything));
}

DeviceBuffer DevicePool::allocate(size_t bytes, const char* what) {
  if (bytes == 0) return DeviceBuffer();
  void* data = nullptr;
  const cudaError_t status = cudaMallocFromPoolAsync(&data, bytes, pool_, stream_);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    fail_out_of_memory(device_, bytes, what);
  }
  TM_CUDA_CHECK(status);
  return DeviceBuffer(data, bytes, stream_);
}

DevicePoolStats DevicePool::stats() const {
  return DevicePoolStats{
      .allocated = pool_attribute(pool_, cudaMemPoolAttrUsedMemCurrent),
      .reserved = pool_attribute(pool_, cudaMemPoolAttrReservedMemCurrent),
      .peak_allocated = pool_attribute(pool_, cudaMemPoolAttrUsedMemHigh),
      .peak_reserved = pool_attribute(pool_, cudaMemPoolAttrReservedMemHigh),
  };
}

}  // namespace tokenmill::cuda
