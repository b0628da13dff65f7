// The CUDA runtime API calls the backend makes, on the emulated device (runtime.h), with the
// meanings the CUDA Runtime API reference gives them. A misuse a GPU would reject returns the
// error CUDA returns, with a line on stderr saying what was wrong.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "cuda_emu/kernel_runner.h"
#include "cuda_emu/launch.h"
#include "cuda_emu/runtime.h"

struct CUmemPoolHandle_st {};

namespace cuda_emu {

namespace {

constexpr size_t kGiB = size_t{1} << 30;

size_t device_capacity() {
  if (const char* value = std::getenv("TOKENMILL_CUDA_EMU_MEMORY")) {
    char* end = nullptr;
    const unsigned long long bytes = std::strtoull(value, &end, 10);
    if (end != value && *end == '\0' && bytes > 0) return static_cast<size_t>(bytes);
    std::fprintf(stderr, "cuda-emu: TOKENMILL_CUDA_EMU_MEMORY=%s is not a byte count; using 8 GiB\n", value);
  }
  return 8 * kGiB;
}

thread_local cudaError_t last_error = cudaSuccess;
thread_local int current_device = 0;
CUmemPoolHandle_st default_pool;

}  // namespace

cudaError_t answer(cudaError_t status) {
  if (!runtime().streams.fault().empty()) status = cudaErrorLaunchFailure;
  if (status != cudaSuccess) last_error = status;
  return status;
}

cudaError_t refuse(cudaError_t status, const std::string& why) {
  std::fprintf(stderr, "cuda-emu: %s\n", why.c_str());
  return answer(status);
}

namespace {

// During a stream capture, a call that would wait for the device (or run outside stream
// order) cannot be recorded: CUDA's global capture mode refuses it and spoils the capture.
cudaError_t refuse_in_capture(const char* call) {
  if (!runtime().streams.capturing()) return cudaSuccess;
  runtime().streams.invalidate_captures();
  return refuse(cudaErrorStreamCaptureUnsupported,
                fmt::format("{} during a stream capture (the capture is now invalidated)", call));
}

const char* copy_kind_name(cudaMemcpyKind kind) {
  switch (kind) {
    case cudaMemcpyHostToHost: return "cudaMemcpyHostToHost";
    case cudaMemcpyHostToDevice: return "cudaMemcpyHostToDevice";
    case cudaMemcpyDeviceToHost: return "cudaMemcpyDeviceToHost";
    case cudaMemcpyDeviceToDevice: return "cudaMemcpyDeviceToDevice";
    default: return "cudaMemcpyDefault";
  }
}

// Where the bytes of one side of a copy must be.
bool side_ok(const DeviceMemory& m, const void* p, size_t bytes, bool device) {
  return device ? m.on_device(p, bytes) : m.on_host(p, bytes);
}

// A strided block of `rows` rows of `width` bytes, `pitch` apart: its extent.
size_t extent(size_t pitch, size_t width, size_t rows) { return rows == 0 ? 0 : pitch * (rows - 1) + width; }

// Queues (and for the synchronous forms, runs) a 2-D copy after checking both sides against
// the kind. With `wait`, the call returns when the copy is done.
cudaError_t copy_2d(const char* call, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                    size_t rows, cudaMemcpyKind kind, cudaStream_t handle, bool wait) {
  Runtime& r = runtime();
  const Lock lock(r.mutex);
  if (!r.streams.fault().empty()) return answer(cudaErrorLaunchFailure);
  CUstream_st* stream = r.streams.resolve(handle);
  if (stream == nullptr)
    return refuse(cudaErrorInvalidResourceHandle, fmt::format("{}: not a live stream", call));
  if (width == 0 || rows == 0) return answer(cudaSuccess);
  if (width > dpitch || width > spitch)
    return refuse(cudaErrorInvalidPitchValue, fmt::format("{}: width over pitch", call));
  const size_t dst_bytes = extent(dpitch, width, rows), src_bytes = extent(spitch, width, rows);
  if (kind == cudaMemcpyDefault)
    kind = r.memory.on_device(src, src_bytes)
               ? (r.memory.on_device(dst, dst_bytes) ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
               : (r.memory.on_device(dst, dst_bytes) ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  if (!side_ok(r.memory, src, src_bytes, src_device) || !side_ok(r.memory, dst, dst_bytes, dst_device))
    return refuse(
        cudaErrorInvalidValue,
        fmt::format("{} {}: the source {} ({} bytes) must be {} and the destination {} ({} bytes) {}", call,
                    copy_kind_name(kind), src, src_bytes,
                    src_device ? "inside one live device allocation" : "host memory", dst, dst_bytes,
                    dst_device ? "inside one live device allocation" : "host memory"));
  // A graph replays copies of device or pinned memory only; and nothing synchronous.
  const bool pageable =
      (!src_device && !r.memory.pinned(src, src_bytes)) || (!dst_device && !r.memory.pinned(dst, dst_bytes));
  if (wait || (stream->capture != nullptr && pageable))
    if (const cudaError_t status = refuse_in_capture(call); status != cudaSuccess) return status;
  // From pageable host memory the copy reads the source now (CUDA stages it before
  // returning); from device or pinned memory, when the stream reaches it.
  std::vector<unsigned char> staged;
  if (!src_device && !r.memory.pinned(src, src_bytes)) {
    staged.resize(src_bytes);
    std::memcpy(staged.data(), src, src_bytes);
    src = staged.data();
  }
  const bool to_pageable = !dst_device && !r.memory.pinned(dst, dst_bytes);
  r.streams.enqueue(stream, call,
                    [&r, dst, dpitch, src, spitch, width, rows, dst_bytes, src_bytes, src_device, dst_device,
                     staged = std::move(staged)]() -> std::string {
                      if ((src_device && !r.memory.on_device(src, src_bytes)) ||
                          (dst_device && !r.memory.on_device(dst, dst_bytes)))
                        return "the copy ran after its device memory was freed (a stream-ordering error)";
                      for (size_t i = 0; i < rows; ++i)
                        std::memmove(static_cast<char*>(dst) + i * dpitch,
                                     static_cast<const char*>(src) + i * spitch, width);
                      return "";
                    });
  // To pageable host memory a copy returns only when done, as do the synchronous calls.
  if (wait || to_pageable) r.streams.run_until(stream);
  return answer(cudaSuccess);
}

cudaError_t memset_on(void* dst, int value, size_t bytes, cudaStream_t handle, bool wait, const char* call) {
  Runtime& r = runtime();
  const Lock lock(r.mutex);
  CUstream_st* stream = r.streams.resolve(handle);
  if (stream == nullptr)
    return refuse(cudaErrorInvalidResourceHandle, fmt::format("{}: not a live stream", call));
  if (bytes == 0) return answer(cudaSuccess);
  if (!r.memory.on_device(dst, bytes))
    return refuse(
        cudaErrorInvalidValue,
        fmt::format("{}: {} ({} bytes) is not inside one live device allocation", call, dst, bytes));
  if (wait)
    if (const cudaError_t status = refuse_in_capture(call); status != cudaSuccess) return status;
  r.streams.enqueue(stream, call, [&r, dst, value, bytes]() -> std::string {
    if (!r.memory.on_device(dst, bytes))
      return "the memset ran after its memory was freed (a stream-ordering error)";
    std::memset(dst, value, bytes);
    return "";
  });
  if (wait) r.streams.run_until(stream);
  return answer(cudaSuccess);
}

cudaError_t allocate(void** out, size_t bytes, MemoryKind kind, bool pooled, const char* call) {
  Runtime& r = runtime();
  const Lock lock(r.mutex);
  if (out == nullptr) return refuse(cudaErrorInvalidValue, fmt::format("{}: null result pointer", call));
  if (!r.streams.fault().empty()) return answer(cudaErrorLaunchFailure);
  *out = r.memory.allocate(bytes, kind, pooled);
  if (*out == nullptr)
    return refuse(cudaErrorMemoryAllocation, fmt::format("{}: {} bytes do not fit ({} of {} in use)", call,
                                                         bytes, r.memory.in_use(), r.memory.capacity()));
  return answer(cudaSuccess);
}

cudaError_t release(void* memory, MemoryKind kind, const char* call) {
  Runtime& r = runtime();
  const Lock lock(r.mutex);
  if (memory == nullptr) return answer(cudaSuccess);
  if (const cudaError_t status = refuse_in_capture(call); status != cudaSuccess) return status;
  r.streams.run_all();  // cudaFree and cudaFreeHost wait for the device
  const std::string why = r.memory.release(memory, kind, false);
  if (!why.empty()) return refuse(cudaErrorInvalidValue, fmt::format("{}: {}", call, why));
  return answer(cudaSuccess);
}

cudaError_t check_device(int device) {
  return device == 0 ? cudaSuccess
                     : refuse(cudaErrorInvalidDevice,
                              fmt::format("GPU {} does not exist: the emulation has GPU 0", device));
}

}  // namespace

Runtime::Runtime() : memory(device_capacity()) {}

Runtime& runtime() {
  static Runtime* r = new Runtime();
  return *r;
}

void enqueue_kernel(const LaunchSite& site, const LaunchConfig& config, const void* kernel,
                    std::function<void()> thread_body) {
  Runtime& r = runtime();
  const Lock lock(r.mutex);
  const std::string where = fmt::format("{} at {}:{}", site.kernel, site.file, site.line);
  const dim3 g = config.grid, b = config.block;
  const uint64_t threads = uint64_t{b.x} * b.y * b.z;
  if (b.x == 0 || b.y == 0 || b.z == 0 || b.x > 1024 || b.y > 1024 || b.z > 64 ||
      threads > kMaxThreadsPerBlock) {
    refuse(cudaErrorInvalidConfiguration,
           fmt::format("launch of {}: a block of {}x{}x{} threads (at most 1024, and "
                       "1024x1024x64 per dimension)",
                       where, b.x, b.y, b.z));
    return;
  }
  if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535) {
    refuse(cudaErrorInvalidConfiguration,
           fmt::format("launch of {}: a grid of {}x{}x{} blocks (at most 2^31-1 x 65535 x 65535)", where, g.x,
                       g.y, g.z));
    return;
  }
  if (config.shared_bytes > kStaticSharedLimit) {
    const auto opt_in = r.dynamic_shared_opt_in.find(kernel);
    const size_t allowed = kernel != nullptr && opt_in != r.dynamic_shared_opt_in.end() ? opt_in->second : 0;
    if (config.shared_bytes > allowed) {
      refuse(
          cudaErrorInvalidValue,
          fmt::format("launch of {}: {} bytes of dynamic shared memory; above {} a kernel must opt in with "
                      "cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize){}",
                      where, config.shared_bytes, kStaticSharedLimit,
                      allowed > 0 ? fmt::format(" (this one allows {})", allowed) : ""));
      return;
    }
  }
  CUstream_st* stream = r.streams.resolve(config.stream);
  if (stream == nullptr) {
    refuse(cudaErrorInvalidResourceHandle, fmt::format("launch of {}: not a live stream", where));
    return;
  }
  Grid grid{site, g, b, config.shared_bytes, std::move(thread_body)};
  r.streams.enqueue(stream, fmt::format("kernel {}", where),
                    [grid = std::move(grid)] { return run_grid(grid); });
}

}  // namespace cuda_emu

using cuda_emu::answer;
using cuda_emu::Lock;
using cuda_emu::MemoryKind;
using cuda_emu::refuse;
using cuda_emu::runtime;

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return answer(cudaSuccess);
}

cudaError_t cudaSetDevice(int device) {
  const cudaError_t status = cuda_emu::check_device(device);
  if (status == cudaSuccess) cuda_emu::current_device = device;
  return answer(status);
}

cudaError_t cudaGetDevice(int* device) {
  *device = cuda_emu::current_device;
  return answer(cudaSuccess);
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (const cudaError_t status = cuda_emu::check_device(device); status != cudaSuccess) return status;
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof(prop->name), "%s", cuda_emu::kDeviceName);
  prop->totalGlobalMem = runtime().memory.capacity();
  prop->sharedMemPerBlock = cuda_emu::kStaticSharedLimit;
  prop->sharedMemPerBlockOptin = cuda_emu::kOptInSharedLimit;
  prop->sharedMemPerMultiprocessor = 228 * 1024;
  prop->regsPerBlock = prop->regsPerMultiprocessor = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = cuda_emu::kMaxThreadsPerBlock;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->major = cuda_emu::kComputeMajor;
  prop->minor = cuda_emu::kComputeMinor;
  prop->multiProcessorCount = cuda_emu::kMultiprocessors;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->maxBlocksPerMultiProcessor = 32;
  prop->l2CacheSize = 50 * 1024 * 1024;
  prop->memoryBusWidth = 5120;
  prop->managedMemory = prop->concurrentManagedAccess = prop->unifiedAddressing = 1;
  prop->memoryPoolsSupported = 1;
  prop->concurrentKernels = 1;
  return answer(cudaSuccess);
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (const cudaError_t status = cuda_emu::check_device(device); status != cudaSuccess) return status;
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, device);
  switch (attr) {
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(p.sharedMemPerBlock); break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = static_cast<int>(p.sharedMemPerBlockOptin); break;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
    case cudaDevAttrGlobalMemoryBusWidth: *value = p.memoryBusWidth; break;
    default:
      return refuse(cudaErrorInvalidValue, fmt::format("cudaDeviceGetAttribute: attribute {} is not emulated",
                                                       static_cast<int>(attr)));
  }
  return answer(cudaSuccess);
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = CUDART_VERSION;
  return answer(cudaSuccess);
}

cudaError_t cudaDriverGetVersion(int* version) {
  *version = CUDART_VERSION;
  return answer(cudaSuccess);
}

// A sticky fault is every call's answer; another error is answered once.
cudaError_t cudaGetLastError() {
  const Lock lock(runtime().mutex);
  if (!runtime().streams.fault().empty()) return cudaErrorLaunchFailure;
  return std::exchange(cuda_emu::last_error, cudaSuccess);
}

cudaError_t cudaPeekAtLastError() {
  const Lock lock(runtime().mutex);
  return runtime().streams.fault().empty() ? cuda_emu::last_error : cudaErrorLaunchFailure;
}

const char* cudaGetErrorName(cudaError_t status) {
  switch (status) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidPitchValue: return "cudaErrorInvalidPitchValue";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoKernelImageForDevice: return "cudaErrorNoKernelImageForDevice";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureIsolation: return "cudaErrorStreamCaptureIsolation";
    case cudaErrorGraphExecUpdateFailure: return "cudaErrorGraphExecUpdateFailure";
    default: return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t status) {
  switch (status) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorLaunchFailure: return "unspecified launch failure (the emulation printed why on stderr)";
    default: return cudaGetErrorName(status);
  }
}

cudaError_t cudaDeviceSynchronize() {
  const Lock lock(runtime().mutex);
  if (const cudaError_t status = cuda_emu::refuse_in_capture("cudaDeviceSynchronize"); status != cudaSuccess)
    return status;
  runtime().streams.run_all();
  return answer(cudaSuccess);
}

cudaError_t cudaDeviceReset() {
  const Lock lock(runtime().mutex);
  runtime().streams.run_all();
  runtime().streams.clear_fault();
  cuda_emu::last_error = cudaSuccess;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  const Lock lock(runtime().mutex);
  *total = runtime().memory.capacity();
  *free = *total - runtime().memory.in_use();
  return answer(cudaSuccess);
}

cudaError_t cudaMalloc(void** memory, size_t bytes) {
  return cuda_emu::allocate(memory, bytes, MemoryKind::kDevice, false, "cudaMalloc");
}

cudaError_t cudaMallocManaged(void** memory, size_t bytes, unsigned int) {
  return cuda_emu::allocate(memory, bytes, MemoryKind::kManaged, false, "cudaMallocManaged");
}

cudaError_t cudaMallocHost(void** memory, size_t bytes) {
  return cuda_emu::allocate(memory, bytes, MemoryKind::kPinnedHost, false, "cudaMallocHost");
}

cudaError_t cudaFree(void* memory) { return cuda_emu::release(memory, MemoryKind::kDevice, "cudaFree"); }

cudaError_t cudaFreeHost(void* memory) {
  return cuda_emu::release(memory, MemoryKind::kPinnedHost, "cudaFreeHost");
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  if (const cudaError_t status = cuda_emu::check_device(device); status != cudaSuccess) return status;
  *pool = &cuda_emu::default_pool;
  return answer(cudaSuccess);
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  const Lock lock(runtime().mutex);
  if (pool != &cuda_emu::default_pool)
    return refuse(cudaErrorInvalidValue, "cudaMemPoolSetAttribute: not a pool");
  switch (attr) {
    case cudaMemPoolAttrReleaseThreshold:
      runtime().pool_release_threshold = *static_cast<uint64_t*>(value);
      break;
    case cudaMemPoolAttrUsedMemHigh:
    case cudaMemPoolAttrReservedMemHigh: runtime().memory.reset_pooled_peak(); break;
    default: return refuse(cudaErrorInvalidValue, "cudaMemPoolSetAttribute: attribute not emulated");
  }
  return answer(cudaSuccess);
}

// The emulated pool keeps no free blocks: reserved memory is the memory in use.
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  const Lock lock(runtime().mutex);
  if (pool != &cuda_emu::default_pool)
    return refuse(cudaErrorInvalidValue, "cudaMemPoolGetAttribute: not a pool");
  auto* out = static_cast<uint64_t*>(value);
  switch (attr) {
    case cudaMemPoolAttrReleaseThreshold: *out = runtime().pool_release_threshold; break;
    case cudaMemPoolAttrReservedMemCurrent:
    case cudaMemPoolAttrUsedMemCurrent: *out = runtime().memory.pooled_in_use(); break;
    case cudaMemPoolAttrReservedMemHigh:
    case cudaMemPoolAttrUsedMemHigh: *out = runtime().memory.pooled_peak(); break;
    default: return refuse(cudaErrorInvalidValue, "cudaMemPoolGetAttribute: attribute not emulated");
  }
  return answer(cudaSuccess);
}

// Stream-ordered allocation: the memory exists from the call on (work queued later on the
// stream may use it); cudaFreeAsync releases it when the stream reaches the free.
cudaError_t cudaMallocFromPoolAsync(void** memory, size_t bytes, cudaMemPool_t pool, cudaStream_t stream) {
  const Lock lock(runtime().mutex);
  if (pool != &cuda_emu::default_pool)
    return refuse(cudaErrorInvalidValue, "cudaMallocFromPoolAsync: not a pool");
  const CUstream_st* on = runtime().streams.resolve(stream);
  if (on == nullptr)
    return refuse(cudaErrorInvalidResourceHandle, "cudaMallocFromPoolAsync: not a live stream");
  if (on->capture != nullptr) {  // a graph's memory nodes are not emulated
    runtime().streams.invalidate_captures();
    return refuse(cudaErrorStreamCaptureUnsupported,
                  "stream-ordered allocation during a capture is not emulated");
  }
  return cuda_emu::allocate(memory, bytes, MemoryKind::kDevice, true, "cudaMallocFromPoolAsync");
}

cudaError_t cudaMallocAsync(void** memory, size_t bytes, cudaStream_t stream) {
  return cudaMallocFromPoolAsync(memory, bytes, &cuda_emu::default_pool, stream);
}

cudaError_t cudaFreeAsync(void* memory, cudaStream_t handle) {
  cuda_emu::Runtime& r = runtime();
  const Lock lock(r.mutex);
  CUstream_st* stream = r.streams.resolve(handle);
  if (stream == nullptr) return refuse(cudaErrorInvalidResourceHandle, "cudaFreeAsync: not a live stream");
  if (stream->capture != nullptr) {
    r.streams.invalidate_captures();
    return refuse(cudaErrorStreamCaptureUnsupported, "stream-ordered free during a capture is not emulated");
  }
  const cuda_emu::Allocation* a = r.memory.holding(memory, 1);
  if (a == nullptr || !a->pooled)
    return refuse(cudaErrorInvalidValue,
                  fmt::format("cudaFreeAsync: {} is not a live pool allocation", memory));
  r.streams.enqueue(stream, "cudaFreeAsync",
                    [&r, memory] { return r.memory.release(memory, MemoryKind::kDevice, true); });
  return answer(cudaSuccess);
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return cuda_emu::copy_2d("cudaMemcpy", dst, bytes, src, bytes, bytes, 1, kind, nullptr, true);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  return cuda_emu::copy_2d("cudaMemcpyAsync", dst, bytes, src, bytes, bytes, 1, kind, stream, false);
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                              size_t height, cudaMemcpyKind kind, cudaStream_t stream) {
  return cuda_emu::copy_2d("cudaMemcpy2DAsync", dst, dpitch, src, spitch, width, height, kind, stream, false);
}

cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  return cuda_emu::memset_on(dst, value, bytes, nullptr, true, "cudaMemset");
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  return cuda_emu::memset_on(dst, value, bytes, stream, false, "cudaMemsetAsync");
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  const Lock lock(runtime().mutex);
  *stream = runtime().streams.create(flags);
  return answer(cudaSuccess);
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t handle) {
  const Lock lock(runtime().mutex);
  CUstream_st* stream = runtime().streams.resolve(handle);
  if (stream == nullptr || stream->legacy)
    return refuse(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: not a live stream");
  runtime().streams.destroy(stream);
  return answer(cudaSuccess);
}

cudaError_t cudaStreamSynchronize(cudaStream_t handle) {
  const Lock lock(runtime().mutex);
  CUstream_st* stream = runtime().streams.resolve(handle);
  if (stream == nullptr)
    return refuse(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize: not a live stream");
  if (const cudaError_t status = cuda_emu::refuse_in_capture("cudaStreamSynchronize"); status != cudaSuccess)
    return status;
  runtime().streams.run_until(stream);
  return answer(cudaSuccess);
}

// The emulated GPU does queued work when asked about it: a query runs the stream's work
// (as if the GPU had had the time to finish it) and answers cudaSuccess, or the fault it hit.
// A polling loop therefore ends; it never sees cudaErrorNotReady.
cudaError_t cudaStreamQuery(cudaStream_t handle) {
  const Lock lock(runtime().mutex);
  CUstream_st* stream = runtime().streams.resolve(handle);
  if (stream == nullptr) return refuse(cudaErrorInvalidResourceHandle, "cudaStreamQuery: not a live stream");
  if (const cudaError_t status = cuda_emu::refuse_in_capture("cudaStreamQuery"); status != cudaSuccess)
    return status;
  runtime().streams.run_until(stream);
  return answer(cudaSuccess);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  const Lock lock(runtime().mutex);
  *event = new CUevent_st{flags, nullptr, 0, std::nullopt};
  runtime().events.insert(*event);
  return answer(cudaSuccess);
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  const Lock lock(runtime().mutex);
  if (runtime().events.erase(event) == 0)
    return refuse(cudaErrorInvalidResourceHandle, "cudaEventDestroy: not a live event");
  delete event;
  return answer(cudaSuccess);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t handle) {
  const Lock lock(runtime().mutex);
  CUstream_st* stream = runtime().streams.resolve(handle);
  if (!runtime().events.contains(event) || stream == nullptr)
    return refuse(cudaErrorInvalidResourceHandle, "cudaEventRecord: not a live event and stream");
  event->reached.reset();
  runtime().streams.enqueue(stream, "cudaEventRecord", [event]() -> std::string {
    if (runtime().events.contains(event)) event->reached = std::chrono::steady_clock::now();
    return "";
  });
  event->stream = stream;
  event->position = stream->queued;
  return answer(cudaSuccess);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  const Lock lock(runtime().mutex);
  if (!runtime().events.contains(event))
    return refuse(cudaErrorInvalidResourceHandle, "cudaEventSynchronize: not a live event");
  if (const cudaError_t status = cuda_emu::refuse_in_capture("cudaEventSynchronize"); status != cudaSuccess)
    return status;
  if (event->stream != nullptr) runtime().streams.run_until(event->stream, event->position);
  return answer(cudaSuccess);
}

// Queued work runs only when waited for, so a query waits (a polling loop must end).
cudaError_t cudaEventQuery(cudaEvent_t event) { return cudaEventSynchronize(event); }

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  const Lock lock(runtime().mutex);
  if (!runtime().events.contains(start) || !runtime().events.contains(end))
    return refuse(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: not live events");
  if ((start->flags & cudaEventDisableTiming) != 0 || (end->flags & cudaEventDisableTiming) != 0)
    return refuse(cudaErrorInvalidResourceHandle,
                  "cudaEventElapsedTime: an event created with cudaEventDisableTiming");
  if (!start->reached || !end->reached) return answer(cudaErrorNotReady);
  *ms = std::chrono::duration<float, std::milli>(*end->reached - *start->reached).count();
  return answer(cudaSuccess);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t handle, cudaEvent_t event, unsigned int) {
  const Lock lock(runtime().mutex);
  CUstream_st* stream = runtime().streams.resolve(handle);
  if (!runtime().events.contains(event) || stream == nullptr)
    return refuse(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: not a live event and stream");
  if (stream->capture != nullptr && event->stream != stream) {  // a dependency a graph here cannot hold
    runtime().streams.invalidate_captures();
    return refuse(cudaErrorStreamCaptureIsolation,
                  "cudaStreamWaitEvent: a capturing stream waits for another stream's event (not emulated)");
  }
  if (event->stream != nullptr)
    runtime().streams.enqueue(stream, "cudaStreamWaitEvent", [] { return std::string(); },
                              {{event->stream, event->position}});
  return answer(cudaSuccess);
}

cudaError_t cudaFuncSetAttribute(const void* kernel, cudaFuncAttribute attr, int value) {
  const Lock lock(runtime().mutex);
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
    return refuse(cudaErrorInvalidValue,
                  "cudaFuncSetAttribute: only the dynamic shared memory size is emulated");
  if (value < 0 || static_cast<size_t>(value) > cuda_emu::kOptInSharedLimit)
    return refuse(cudaErrorInvalidValue,
                  fmt::format("cudaFuncSetAttribute: {} bytes of dynamic shared memory (at "
                              "most {})",
                              value, cuda_emu::kOptInSharedLimit));
  runtime().dynamic_shared_opt_in[kernel] = static_cast<size_t>(value);
  return answer(cudaSuccess);
}

}  // extern "C"
