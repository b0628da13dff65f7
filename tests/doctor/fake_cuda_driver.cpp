// A fake libcuda.so.1 for the doctor tests: the driver API entry points the doctor calls,
// answering with the values of compile definitions (tests/doctor/CMakeLists.txt):
// FAKE_DRIVER_CUDA_VERSION (e.g. 11080), FAKE_INIT_RESULT, FAKE_DEVICE_COUNT,
// FAKE_DEVICE_NAME, FAKE_CC_MAJOR, FAKE_CC_MINOR, FAKE_MEMORY_MIB.
#include <cstddef>
#include <cstdio>

namespace {
constexpr int kInvalidValue = 1;     // CUDA_ERROR_INVALID_VALUE
constexpr int kInvalidDevice = 101;  // CUDA_ERROR_INVALID_DEVICE
bool valid(int device) { return device >= 0 && device < FAKE_DEVICE_COUNT; }
}  // namespace

extern "C" {

int cuInit(unsigned) { return FAKE_INIT_RESULT; }

int cuDriverGetVersion(int* version) {
  *version = FAKE_DRIVER_CUDA_VERSION;
  return 0;
}

int cuDeviceGetCount(int* count) {
  *count = FAKE_DEVICE_COUNT;
  return 0;
}

int cuDeviceGet(int* device, int ordinal) {
  if (!valid(ordinal)) return kInvalidDevice;
  *device = ordinal;
  return 0;
}

int cuDeviceGetName(char* name, int length, int device) {
  if (!valid(device)) return kInvalidDevice;
  std::snprintf(name, static_cast<size_t>(length), "%s", FAKE_DEVICE_NAME);
  return 0;
}

int cuDeviceGetAttribute(int* value, int attribute, int device) {
  if (!valid(device)) return kInvalidDevice;
  switch (attribute) {
    case 16: *value = 132; return 0;  // multiprocessors
    case 75: *value = FAKE_CC_MAJOR; return 0;
    case 76: *value = FAKE_CC_MINOR; return 0;
    default: return kInvalidValue;
  }
}

int cuDeviceTotalMem_v2(size_t* bytes, int device) {
  if (!valid(device)) return kInvalidDevice;
  *bytes = size_t{FAKE_MEMORY_MIB} << 20;
  return 0;
}

int cuGetErrorName(int error, const char** name) {
  *name = error == 100 ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN";
  return 0;
}

}  // extern "C"
