#include "backend/cuda/cuda_backend.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <string>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm_engine.h"
#include "core/error.h"

namespace tokenmill {

namespace cuda {

namespace {

// The oldest architecture the kernels are built for (cmake/cuda.cmake): BF16 tensor cores.
constexpr int kMinComputeMajor = 8;

// True when the NVIDIA driver's library can be loaded (the runtime reports its absence as an
// "insufficient driver").
bool driver_library_present() {
  void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (handle == nullptr) return false;
  dlclose(handle);
  return true;
}

}  // namespace

std::string unavailable_reason(int device) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess && !driver_library_present()) {
    cudaGetLastError();
    return "no NVIDIA driver (libcuda.so.1 not found; inside a container run with --gpus all)";
  }
  if (status != cudaSuccess) {
    cudaGetLastError();
    const char* hint = hint_for(status);
    return fmt::format("the CUDA runtime found no usable GPU ({}){}{}", cudaGetErrorName(status),
                       *hint ? ": " : "", hint);
  }
  if (device < 0 || device >= count)
    return fmt::format("GPU {} does not exist: {} visible (CUDA_VISIBLE_DEVICES selects which)", device,
                       count);
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    cudaGetLastError();
    return fmt::format("GPU {} cannot be queried", device);
  }
  if (prop.major < kMinComputeMajor)
    return fmt::format("GPU {} ({}) is sm_{}{}; the CUDA backend needs sm_80 (Ampere) or newer", device,
                       prop.name, prop.major, prop.minor);
  return "";
}

void* managed_allocate(size_t bytes) {
  void* memory = nullptr;
  TM_CUDA_CHECK(cudaMallocManaged(&memory, bytes == 0 ? 1 : bytes));
  return memory;
}

void managed_free(void* memory) noexcept { cudaFree(memory); }

void synchronize_device() { TM_CUDA_CHECK(cudaDeviceSynchronize()); }

void copy_on_device(void* device_dst, const void* device_src, size_t bytes) {
  TM_CUDA_CHECK(cudaMemcpy(device_dst, device_src, bytes, cudaMemcpyDeviceToDevice));
}

CudaBackend::CudaBackend(int device) : device_(device) {
  TM_CUDA_CHECK(cudaSetDevice(device_));
  cudaDeviceProp prop{};
  TM_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  name_ = fmt::format("cuda:{} ({}, sm_{}{})", device_, prop.name, prop.major, prop.minor);
  owned_stream_ = make_stream();
  stream_ = owned_stream_.get();
  pool_ = std::make_unique<DevicePool>(device_, stream_);
  staging_ = std::make_unique<HostStaging>(stream_);
  gemm_ = std::make_unique<GemmEngine>(stream_, *pool_);
}

// The members go in reverse order: the GEMM engine, staging and pool before the stream, which
// waits for their last work.
CudaBackend::~CudaBackend() = default;

void CudaBackend::make_current() const {
  int current = -1;
  TM_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device_) TM_CUDA_CHECK(cudaSetDevice(device_));
}

DeviceBuffer CudaBackend::copy_to_device(const void* host, size_t bytes, const char* what) {
  DeviceBuffer buffer = pool_->allocate(bytes, what);
  staging_->copy_to_device(buffer.data(), host, bytes);
  return buffer;
}

}  // namespace cuda

std::unique_ptr<Backend> make_cuda_backend(int device) {
  const std::string why = cuda::unavailable_reason(device);
  if (!why.empty()) fail("cannot use the CUDA backend: {}", why);
  return std::make_unique<cuda::CudaBackend>(device);
}

}  // namespace tokenmill
