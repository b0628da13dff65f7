// The machine-readable report: every fact and finding; unknown values are null.
#include <fmt/format.h>

#include "doctor/doctor.h"

namespace tokenmill::doctor {

namespace {

using nlohmann::json;

template <class T>
json optional_json(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json version_json(const std::optional<Version>& v) { return v ? json(v->text()) : json(nullptr); }

// A cgroup limit: null when unknown, "unlimited", or the number.
json limit_json(const CgroupLimit& limit) {
  if (!limit.known) return nullptr;
  return limit.value ? json(*limit.value) : json("unlimited");
}

json load_json(const LibraryLoad& load) {
  return {{"loaded", load.loaded}, {"path", load.path}, {"error", load.error}};
}

json host_json(const HostFacts& h) {
  return {{"os", h.os},
          {"kernel", h.kernel},
          {"glibc", h.glibc},
          {"cpu_model", h.cpu_model},
          {"online_cpus", h.online_cpus > 0 ? json(h.online_cpus) : json(nullptr)},
          {"affinity_cpus", h.affinity_cpus > 0 ? json(h.affinity_cpus) : json(nullptr)},
          {"memory_total_bytes", optional_json(h.memory_total_bytes)},
          {"memory_available_bytes", optional_json(h.memory_available_bytes)},
          {"transparent_hugepages",
           h.transparent_hugepages.empty() ? json(nullptr) : json(h.transparent_hugepages)},
          {"container", h.container.empty() ? json(nullptr) : json(h.container)},
          {"container_evidence", h.container_evidence},
          {"cgroup_version", h.cgroup_version > 0 ? json(h.cgroup_version) : json(nullptr)},
          {"cgroup_memory_limit_bytes", limit_json(h.memory_limit_bytes)},
          {"cgroup_cpu_limit", limit_json(h.cpu_limit)},
          {"nvidia_device_nodes", h.nvidia_device_nodes},
          {"cuda_visible_devices", optional_json(h.cuda_visible_devices)},
          {"nvidia_visible_devices", optional_json(h.nvidia_visible_devices)}};
}

json cpu_json(const CpuFacts& c) {
  const CpuFeatures& f = c.features;
  return {{"features",
           {{"avx2", f.avx2},
            {"fma", f.fma},
            {"f16c", f.f16c},
            {"avx512f", f.avx512f},
            {"avx512bw", f.avx512bw},
            {"avx512vl", f.avx512vl},
            {"avx512dq", f.avx512dq},
            {"avx512bf16", f.avx512bf16},
            {"avx512vnni", f.avx512vnni},
            {"amx_tile", f.amx_tile},
            {"amx_bf16", f.amx_bf16},
            {"amx_int8", f.amx_int8},
            {"amx_granted", c.amx_granted}}},
          {"backend_isa", c.isa.empty() ? json(nullptr) : json(c.isa)},
          {"isa_error", c.isa_error}};
}

json nvml_device_json(const NvmlDevice& d) {
  return {{"index", d.index},
          {"name", d.name},
          {"ecc_enabled", optional_json(d.ecc_enabled)},
          {"persistence_mode", optional_json(d.persistence_mode)},
          {"sm_clock_mhz", optional_json(d.sm_clock_mhz)},
          {"max_sm_clock_mhz", optional_json(d.max_sm_clock_mhz)},
          {"memory_clock_mhz", optional_json(d.memory_clock_mhz)},
          {"power_watts", optional_json(d.power_watts)},
          {"power_limit_watts", optional_json(d.power_limit_watts)},
          {"gpu_utilization_percent", optional_json(d.gpu_utilization_percent)},
          {"memory_utilization_percent", optional_json(d.memory_utilization_percent)},
          {"memory_total_bytes", optional_json(d.memory_total_bytes)},
          {"memory_used_bytes", optional_json(d.memory_used_bytes)},
          {"active_nvlinks", d.active_nvlinks}};
}

json gpu_json(const DoctorReport& r) {
  const GpuStack& g = r.gpu;
  json devices = json::array();
  for (const CudaDevice& d : g.driver.devices)
    devices.push_back({{"index", d.index},
                       {"name", d.name},
                       {"compute_capability", fmt::format("{}.{}", d.cc_major, d.cc_minor)},
                       {"memory_bytes", d.memory_bytes},
                       {"multiprocessors", d.multiprocessors},
                       {"bf16_tensor_cores", d.cc_major >= 8},
                       {"fp8_tensor_cores", d.cc_major * 10 + d.cc_minor >= 89}});
  json libraries = json::object();
  for (const CudaLibraryFacts& lib : g.libraries) {
    libraries[lib.name] = load_json(lib.load);
    libraries[lib.name]["version"] = version_json(lib.version);
  }
  json nvml_devices = json::array(), links = json::array();
  for (const NvmlDevice& d : g.nvml.devices) nvml_devices.push_back(nvml_device_json(d));
  for (const GpuLink& l : g.nvml.links)
    links.push_back({{"a", l.a},
                     {"b", l.b},
                     {"level", l.level},
                     {"across_sockets", l.across_sockets},
                     {"nvlink", optional_json(l.nvlink)}});
  json driver = load_json(g.driver.load);
  driver["init_result"] = g.driver.init_result;
  driver["init_error"] = g.driver.init_error;
  driver["cuda_version"] = g.driver.cuda_version ? json(g.driver.cuda_version->short_text()) : json(nullptr);
  json nvml = load_json(g.nvml.load);
  nvml["init_result"] = g.nvml.init_result;
  nvml["driver_version"] = g.nvml.driver_version.empty() ? json(nullptr) : json(g.nvml.driver_version);
  nvml["devices"] = nvml_devices;
  nvml["links"] = links;
  return {{"cuda_backend", kBuildHasCudaBackend},
          {"build_expects",
           {{"cuda", version_json(r.expected.cuda)},
            {"cublas", version_json(r.expected.cublas)},
            {"cudnn", version_json(r.expected.cudnn)},
            {"nccl", version_json(r.expected.nccl)}}},
          {"driver", driver},
          {"devices", devices},
          {"libraries", libraries},
          {"nvml", nvml}};
}

json finding_json(const Finding& f) {
  return {{"area", f.area}, {"status", status_name(f.status)}, {"found", f.found}, {"fix", f.fix}};
}

}  // namespace

json to_json(const DoctorReport& r) {
  json self_tests = json::array();
  for (const SelfTestResult& t : r.self_tests)
    self_tests.push_back({{"name", t.name},
                          {"device", t.device},
                          {"max_relative_error", t.max_relative_error},
                          {"tolerance", t.tolerance},
                          {"seconds", t.seconds},
                          {"gflops_per_s", t.gflops_per_s},
                          {"gbytes_per_s", t.gbytes_per_s},
                          {"passed", t.passed}});
  json findings = json::array();
  for (const Finding& f : r.findings) findings.push_back(finding_json(f));
  const Finding* blocking = first_blocking(r);
  return {{"host", host_json(r.host)},
          {"cpu", cpu_json(r.cpu)},
          {"gpu", gpu_json(r)},
          {"self_test", self_tests},
          {"findings", findings},
          {"require_gpu", r.require_gpu},
          {"ready", blocking == nullptr},
          {"exit_status", doctor_exit_status(r)},
          {"first_blocking", blocking != nullptr ? finding_json(*blocking) : json(nullptr)}};
}

}  // namespace tokenmill::doctor
