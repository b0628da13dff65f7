// The driver API through libcuda.so.1: cuInit, the CUDA version the driver supports, and
// each device's name, compute capability, memory and SM count.
#include <array>
#include <cstddef>

#include "doctor/dynamic_library.h"
#include "doctor/gpu_stack.h"

namespace tokenmill::doctor {

namespace {

// The few driver API signatures used (cuda.h, CUresult = int, CUdevice = int).
using CuInit = int(unsigned flags);
using CuDriverGetVersion = int(int* version);
using CuDeviceGetCount = int(int* count);
using CuDeviceGet = int(int* device, int ordinal);
using CuDeviceGetName = int(char* name, int length, int device);
using CuDeviceGetAttribute = int(int* value, int attribute, int device);
using CuDeviceTotalMem = int(size_t* bytes, int device);
using CuGetErrorName = int(int error, const char** name);

constexpr int kAttributeMultiprocessorCount = 16;  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr int kAttributeCcMajor = 75;              // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttributeCcMinor = 76;              // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

struct Api {
  CuInit* init;
  CuDriverGetVersion* driver_version;
  CuDeviceGetCount* device_count;
  CuDeviceGet* device_get;
  CuDeviceGetName* device_name;
  CuDeviceGetAttribute* attribute;
  CuDeviceTotalMem* total_memory;
  CuGetErrorName* error_name;
};

std::string error_name(const Api& api, int result) {
  const char* name = nullptr;
  if (api.error_name != nullptr && api.error_name(result, &name) == 0 && name != nullptr) return name;
  return "CUresult " + std::to_string(result);
}

CudaDevice describe_device(const Api& api, int ordinal) {
  CudaDevice d;
  d.index = ordinal;
  int device = 0;
  if (api.device_get(&device, ordinal) != 0) return d;
  std::array<char, 256> name{};
  if (api.device_name(name.data(), static_cast<int>(name.size()), device) == 0) d.name = name.data();
  api.attribute(&d.cc_major, kAttributeCcMajor, device);
  api.attribute(&d.cc_minor, kAttributeCcMinor, device);
  api.attribute(&d.multiprocessors, kAttributeMultiprocessorCount, device);
  size_t bytes = 0;
  if (api.total_memory(&bytes, device) == 0) d.memory_bytes = bytes;
  return d;
}

}  // namespace

CudaDriverFacts probe_cuda_driver(const LibrarySearch& search) {
  CudaDriverFacts facts;
  const std::array<std::string, 1> names = {"libcuda.so.1"};
  const DynamicLibrary lib = DynamicLibrary::open(names, search.dirs, facts.load);
  if (!lib.loaded()) return facts;
  const Api api{
      .init = lib.function<CuInit>("cuInit"),
      .driver_version = lib.function<CuDriverGetVersion>("cuDriverGetVersion"),
      .device_count = lib.function<CuDeviceGetCount>("cuDeviceGetCount"),
      .device_get = lib.function<CuDeviceGet>("cuDeviceGet"),
      .device_name = lib.function<CuDeviceGetName>("cuDeviceGetName"),
      .attribute = lib.function<CuDeviceGetAttribute>("cuDeviceGetAttribute"),
      .total_memory = lib.function<CuDeviceTotalMem>("cuDeviceTotalMem_v2"),
      .error_name = lib.function<CuGetErrorName>("cuGetErrorName"),
  };
  if (api.init == nullptr || api.driver_version == nullptr || api.device_count == nullptr ||
      api.device_get == nullptr || api.device_name == nullptr || api.attribute == nullptr ||
      api.total_memory == nullptr) {
    facts.load.error = lib.path() +
                       " lacks a driver API entry point (cuInit, cuDriverGetVersion, cuDevice*): "
                       "not a CUDA driver library";
    return facts;
  }
  facts.load.loaded = true;
  // cuDriverGetVersion works before (and without) a successful cuInit.
  if (int version = 0; api.driver_version(&version) == 0 && version > 0)
    facts.cuda_version = cuda_version_from_code(version);
  facts.init_result = api.init(0);
  if (facts.init_result != 0) {
    facts.init_error = error_name(api, facts.init_result);
    return facts;
  }
  int count = 0;
  if (api.device_count(&count) != 0) count = 0;
  for (int i = 0; i < count; ++i) facts.devices.push_back(describe_device(api, i));
  return facts;
}

}  // namespace tokenmill::doctor
