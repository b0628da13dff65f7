// A fake libnvidia-ml.so.1 for the doctor tests: FAKE_NVML_DEVICES GPUs with driver
// FAKE_NVML_DRIVER, ECC and persistence on, idle (or FAKE_NVML_GPU_UTILIZATION and
// FAKE_NVML_MEMORY_UTILIZATION percent busy), all pairs on one board joined by NVLink.
// Every symbol has the type the doctor calls it through (doctor/nvml_api.h), so UBSan's
// function-type check holds.
#include <cstdio>

#include "doctor/nvml_api.h"

using tokenmill::doctor::nvml::Device;
using tokenmill::doctor::nvml::Memory;
using tokenmill::doctor::nvml::Utilization;

struct tokenmill::doctor::nvml::DeviceHandle {
  int index;
};

#ifndef FAKE_NVML_GPU_UTILIZATION
#define FAKE_NVML_GPU_UTILIZATION 0
#define FAKE_NVML_MEMORY_UTILIZATION 0
#endif

namespace {
tokenmill::doctor::nvml::DeviceHandle devices[FAKE_NVML_DEVICES];
constexpr int kInvalidArgument = 2;  // NVML_ERROR_INVALID_ARGUMENT
bool valid(const Device d) { return d != nullptr && d >= devices && d < devices + FAKE_NVML_DEVICES; }
}  // namespace

extern "C" {

int nvmlInit_v2() { return 0; }
int nvmlShutdown() { return 0; }

int nvmlSystemGetDriverVersion(char* version, unsigned length) {
  std::snprintf(version, length, "%s", FAKE_NVML_DRIVER);
  return 0;
}

int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = FAKE_NVML_DEVICES;
  return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, Device* device) {
  if (index >= FAKE_NVML_DEVICES) return kInvalidArgument;
  devices[index].index = static_cast<int>(index);
  *device = &devices[index];
  return 0;
}

int nvmlDeviceGetName(Device d, char* name, unsigned length) {
  if (!valid(d)) return kInvalidArgument;
  std::snprintf(name, length, "NVIDIA H100 80GB HBM3");
  return 0;
}

int nvmlDeviceGetEccMode(Device d, int* current, int* pending) {
  if (!valid(d)) return kInvalidArgument;
  *current = *pending = 1;
  return 0;
}

int nvmlDeviceGetPersistenceMode(Device d, int* mode) {
  if (!valid(d)) return kInvalidArgument;
  *mode = 1;
  return 0;
}

int nvmlDeviceGetClockInfo(Device d, int type, unsigned* mhz) {
  if (!valid(d)) return kInvalidArgument;
  *mhz = type == 2 ? 2619 : 345;  // memory clock; idle SM clock
  return 0;
}

int nvmlDeviceGetMaxClockInfo(Device d, int, unsigned* mhz) {
  if (!valid(d)) return kInvalidArgument;
  *mhz = 1980;
  return 0;
}

int nvmlDeviceGetPowerUsage(Device d, unsigned* milliwatts) {
  if (!valid(d)) return kInvalidArgument;
  *milliwatts = 71000;
  return 0;
}

int nvmlDeviceGetEnforcedPowerLimit(Device d, unsigned* milliwatts) {
  if (!valid(d)) return kInvalidArgument;
  *milliwatts = 700000;
  return 0;
}

int nvmlDeviceGetUtilizationRates(Device d, Utilization* rates) {
  if (!valid(d)) return kInvalidArgument;
  *rates = {FAKE_NVML_GPU_UTILIZATION, FAKE_NVML_MEMORY_UTILIZATION};
  return 0;
}

int nvmlDeviceGetMemoryInfo(Device d, Memory* memory) {
  if (!valid(d)) return kInvalidArgument;
  *memory = {81559ull << 20, 81000ull << 20, 559ull << 20};
  return 0;
}

int nvmlDeviceGetTopologyCommonAncestor(Device a, Device b, int* level) {
  if (!valid(a) || !valid(b)) return kInvalidArgument;
  *level = 0;  // NVML_TOPOLOGY_INTERNAL
  return 0;
}

int nvmlDeviceGetP2PStatus(Device a, Device b, int, int* status) {
  if (!valid(a) || !valid(b)) return kInvalidArgument;
  *status = 0;  // NVML_P2P_STATUS_OK
  return 0;
}

int nvmlDeviceGetNvLinkState(Device d, unsigned link, int* active) {
  if (!valid(d) || link >= 18) return kInvalidArgument;
  *active = 1;
  return 0;
}

}  // extern "C"
