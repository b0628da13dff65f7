// The few NVML C signatures the doctor and the bench's sampler (measure/nvml_sampler.h) call
// (nvml.h: nvmlReturn_t and enums are int, nvmlDevice_t an opaque handle), declared here
// instead of including nvml.h so the build needs no NVIDIA header. tests/doctor/fake_nvml.cpp
// defines its symbols with these types.
#pragma once

namespace tokenmill::doctor::nvml {

struct DeviceHandle;  // opaque, as nvmlDevice_t
using Device = DeviceHandle*;
struct Utilization {  // nvmlUtilization_t
  unsigned gpu, memory;
};
struct Memory {  // nvmlMemory_t
  unsigned long long total, free, used;
};

using Init = int();
using Shutdown = int();
using GetDriverVersion = int(char* version, unsigned length);
using GetCount = int(unsigned* count);
using GetHandle = int(unsigned index, Device* device);
using GetHandleByUuid = int(const char* uuid, Device* device);
using GetName = int(Device device, char* name, unsigned length);
using GetEccMode = int(Device device, int* current, int* pending);
using GetPersistenceMode = int(Device device, int* mode);
using GetClock = int(Device device, int type, unsigned* mhz);
using GetMilliwatts = int(Device device, unsigned* milliwatts);
using GetUtilization = int(Device device, Utilization* rates);
using GetMemoryInfo = int(Device device, Memory* memory);
using GetCommonAncestor = int(Device a, Device b, int* level);
using GetP2PStatus = int(Device a, Device b, int caps_index, int* status);
using GetNvLinkState = int(Device device, unsigned link, int* active);

constexpr int kClockSm = 1;           // NVML_CLOCK_SM
constexpr int kClockMemory = 2;       // NVML_CLOCK_MEM
constexpr int kP2PCapsNvlink = 2;     // NVML_P2P_CAPS_INDEX_NVLINK
constexpr unsigned kMaxNvlinks = 18;  // NVML_NVLINK_MAX_LINKS
constexpr int kTopologySystem = 50;   // NVML_TOPOLOGY_SYSTEM: across the CPU interconnect

}  // namespace tokenmill::doctor::nvml
