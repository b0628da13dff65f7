// NVML through libnvidia-ml.so.1: the driver version and, per GPU, ECC, persistence mode,
// clocks, power, utilisation and memory; for two GPUs or more, how each pair is connected.
#include <array>
#include <optional>
#include <string>

#include "doctor/dynamic_library.h"
#include "doctor/gpu_stack.h"
#include "doctor/nvml_api.h"

namespace tokenmill::doctor {

namespace {

using namespace nvml;  // the C API's signatures and constants

// Calls `fn` when the library exports it; the value when the call succeeds.
template <class T, class Fn, class... Args>
std::optional<T> query(Fn* fn, Args... args) {
  T value{};
  if (fn == nullptr || fn(args..., &value) != 0) return std::nullopt;
  return value;
}

std::string topology_level_name(int level) {
  switch (level) {
    case 0: return "same board";
    case 10: return "one PCIe switch";
    case 20: return "several PCIe switches";
    case 30: return "PCIe host bridge";
    case 40: return "NUMA node";
    case kTopologySystem: return "system (across sockets)";
    default: return "unknown";
  }
}

class Nvml {
 public:
  explicit Nvml(const DynamicLibrary& lib) : lib_(lib) {}

  NvmlDevice describe(Device device, int index) const {
    NvmlDevice d;
    d.index = index;
    std::array<char, 96> name{};
    if (auto* get_name = lib_.function<GetName>("nvmlDeviceGetName");
        get_name != nullptr && get_name(device, name.data(), name.size()) == 0)
      d.name = name.data();
    int ecc = 0, pending = 0;
    if (auto* ecc_mode = lib_.function<GetEccMode>("nvmlDeviceGetEccMode");
        ecc_mode != nullptr && ecc_mode(device, &ecc, &pending) == 0)
      d.ecc_enabled = ecc != 0;
    if (auto mode = query<int>(lib_.function<GetPersistenceMode>("nvmlDeviceGetPersistenceMode"), device))
      d.persistence_mode = *mode != 0;
    auto* clock = lib_.function<GetClock>("nvmlDeviceGetClockInfo");
    d.sm_clock_mhz = query<unsigned>(clock, device, kClockSm);
    d.memory_clock_mhz = query<unsigned>(clock, device, kClockMemory);
    d.max_sm_clock_mhz =
        query<unsigned>(lib_.function<GetClock>("nvmlDeviceGetMaxClockInfo"), device, kClockSm);
    if (auto mw = query<unsigned>(lib_.function<GetMilliwatts>("nvmlDeviceGetPowerUsage"), device))
      d.power_watts = *mw / 1000.0;
    if (auto mw = query<unsigned>(lib_.function<GetMilliwatts>("nvmlDeviceGetEnforcedPowerLimit"), device))
      d.power_limit_watts = *mw / 1000.0;
    if (auto u = query<Utilization>(lib_.function<GetUtilization>("nvmlDeviceGetUtilizationRates"), device)) {
      d.gpu_utilization_percent = u->gpu;
      d.memory_utilization_percent = u->memory;
    }
    if (auto m = query<Memory>(lib_.function<GetMemoryInfo>("nvmlDeviceGetMemoryInfo"), device)) {
      d.memory_total_bytes = m->total;
      d.memory_used_bytes = m->used;
    }
    if (auto* link_state = lib_.function<GetNvLinkState>("nvmlDeviceGetNvLinkState"))
      for (unsigned link = 0; link < kMaxNvlinks; ++link)
        if (int active = 0; link_state(device, link, &active) == 0 && active != 0) ++d.active_nvlinks;
    return d;
  }

  GpuLink link(Device a, Device b, int ia, int ib) const {
    GpuLink l;
    l.a = ia;
    l.b = ib;
    l.level = "unknown";
    if (auto level =
            query<int>(lib_.function<GetCommonAncestor>("nvmlDeviceGetTopologyCommonAncestor"), a, b)) {
      l.level = topology_level_name(*level);
      l.across_sockets = *level >= kTopologySystem;
    }
    if (auto status = query<int>(lib_.function<GetP2PStatus>("nvmlDeviceGetP2PStatus"), a, b, kP2PCapsNvlink))
      l.nvlink = *status == 0;  // NVML_P2P_STATUS_OK
    return l;
  }

 private:
  const DynamicLibrary& lib_;
};

}  // namespace

NvmlFacts probe_nvml(const LibrarySearch& search) {
  NvmlFacts facts;
  const std::array<std::string, 1> names = {"libnvidia-ml.so.1"};
  const DynamicLibrary lib = DynamicLibrary::open(names, search.dirs, facts.load);
  if (!lib.loaded()) return facts;
  auto* init = lib.function<Init>("nvmlInit_v2");
  auto* count = lib.function<GetCount>("nvmlDeviceGetCount_v2");
  auto* handle = lib.function<GetHandle>("nvmlDeviceGetHandleByIndex_v2");
  if (init == nullptr || count == nullptr || handle == nullptr) {
    facts.load.error =
        lib.path() + " lacks nvmlInit_v2 / nvmlDeviceGetCount_v2 / nvmlDeviceGetHandleByIndex_v2";
    return facts;
  }
  facts.load.loaded = true;
  facts.init_result = init();
  if (facts.init_result != 0) return facts;
  std::array<char, 80> version{};
  if (auto* driver = lib.function<GetDriverVersion>("nvmlSystemGetDriverVersion");
      driver != nullptr && driver(version.data(), version.size()) == 0)
    facts.driver_version = version.data();
  const Nvml nvml(lib);
  std::vector<Device> devices;
  unsigned n = 0;
  if (count(&n) != 0) n = 0;
  for (unsigned i = 0; i < n; ++i) {
    Device device = nullptr;
    if (handle(i, &device) != 0) continue;
    devices.push_back(device);
    facts.devices.push_back(nvml.describe(device, static_cast<int>(i)));
  }
  for (size_t a = 0; a < devices.size(); ++a)
    for (size_t b = a + 1; b < devices.size(); ++b)
      facts.links.push_back(
          nvml.link(devices[a], devices[b], facts.devices[a].index, facts.devices[b].index));
  if (auto* shutdown = lib.function<Shutdown>("nvmlShutdown")) shutdown();
  return facts;
}

}  // namespace tokenmill::doctor
