// Verdicts on the CUDA libraries (found vs what the build expects), NVML's per-GPU state and
// the links between GPUs.
#include <fmt/format.h>

#include "doctor/findings.h"

namespace tokenmill::doctor {

namespace {

struct LibraryNames {
  const char* key;      // CudaLibraryFacts::name
  const char* display;  // how people write it
};
constexpr LibraryNames kNames[] = {
    {"cudart", "CUDA runtime"}, {"cublasLt", "cuBLASLt"}, {"cudnn", "cuDNN"}, {"nccl", "NCCL"}};

std::string display_name(const std::string& key) {
  for (const LibraryNames& n : kNames)
    if (key == n.key) return n.display;
  return key;
}

std::optional<Version> expected_version(const std::string& key, const BuildExpectations& expected) {
  // cudaRuntimeGetVersion reports major.minor only, so the toolkit's patch is not compared.
  if (key == "cudart")
    return expected.cuda ? std::optional(Version{expected.cuda->major, expected.cuda->minor, 0})
                         : std::nullopt;
  if (key == "cublasLt") return expected.cublas;
  if (key == "cudnn") return expected.cudnn;
  return expected.nccl;
}

Finding library_finding(const CudaLibraryFacts& lib, const std::optional<Version>& want, size_t gpus) {
  const std::string name = display_name(lib.name);
  if (!lib.load.loaded) {
    // Only NCCL's absence is harmless on one GPU: it is the multi-GPU collective library.
    const bool needed = gpus > 0 && (lib.name != "nccl" || gpus > 1);
    const std::string which = want ? fmt::format("{} {}.x (>= {})", name, want->major, want->text()) : name;
    return {lib.name, needed ? Status::Warn : Status::Info,
            fmt::format("{} not found ({})", name, lib.load.error),
            needed ? fmt::format("install {} and add its directory to the linker path (ldconfig or "
                                 "LD_LIBRARY_PATH)",
                                 which)
                   : std::string()};
  }
  const Version& got = *lib.version;
  if (!want)
    return {
        lib.name, Status::Info,
        fmt::format("{} {} at {} (this build recorded no expected version)", name, got.text(), lib.load.path),
        ""};
  if (got.major != want->major)
    return {
        lib.name, Status::Fail,
        fmt::format("{} {} found at {} but this build expects {} {} ({})", name, got.text(), lib.load.path,
                    name, want->major, want->text()),
        fmt::format("install {} {}.x (>= {}) and put its directory first in the linker path (LD_LIBRARY_PATH "
                    "or ldconfig): a different major version is a different ABI",
                    name, want->major, want->text())};
  if (got < *want)
    return {
        lib.name, Status::Warn,
        fmt::format("{} {} at {} is older than the {} this build expects", name, got.text(), lib.load.path,
                    want->text()),
        fmt::format("upgrade {} to >= {}: calls added since {} are missing", name, want->text(), got.text())};
  return {lib.name, Status::Ok,
          fmt::format("{} {} at {} (this build expects {})", name, got.text(), lib.load.path, want->text()),
          ""};
}

// The runtime needs a driver that supports its CUDA version (cudaErrorInsufficientDriver:
// "CUDA driver version is insufficient for CUDA runtime version").
void runtime_vs_driver(const GpuStack& gpu, std::vector<Finding>& out) {
  if (!gpu.driver.load.loaded || !gpu.driver.cuda_version) return;
  for (const CudaLibraryFacts& lib : gpu.libraries)
    if (lib.name == "cudart" && lib.version && lib.version->major > gpu.driver.cuda_version->major)
      out.push_back(
          {"cudart", Status::Fail,
           fmt::format("the CUDA runtime {} at {} is newer than the driver supports (CUDA {})",
                       lib.version->short_text(), lib.load.path, gpu.driver.cuda_version->short_text()),
           "upgrade the driver, or put the runtime that matches it first in the linker path"});
}

void nvml_device_findings(const NvmlDevice& d, std::vector<Finding>& out) {
  const std::string area = fmt::format("gpu {}", d.index);
  if (d.persistence_mode == false)
    out.push_back({area, Status::Warn,
                   fmt::format("GPU {}: persistence mode off, so the driver tears the GPU down whenever no "
                               "process uses it and every start pays its initialisation",
                               d.index),
                   "sudo nvidia-smi -pm 1, or run nvidia-persistenced"});
  if (d.ecc_enabled == false)
    out.push_back({area, Status::Info,
                   fmt::format("GPU {}: ECC off, memory bit flips go undetected", d.index),
                   "for long training runs: sudo nvidia-smi -e 1 and reboot"});
  const bool busy_compute = d.gpu_utilization_percent.value_or(0) >= 10;
  const bool busy_memory =
      d.memory_total_bytes && d.memory_used_bytes && *d.memory_used_bytes * 10 >= *d.memory_total_bytes;
  if (busy_compute || busy_memory)
    out.push_back(
        {area, Status::Warn,
         fmt::format("GPU {} is in use: {}% utilisation, {} of {} memory used", d.index,
                     d.gpu_utilization_percent.value_or(0), gib(double(d.memory_used_bytes.value_or(0))),
                     gib(double(d.memory_total_bytes.value_or(0)))),
         "benchmarks and memory planning assume an idle GPU: stop the other processes (nvidia-smi lists "
         "them) or select another GPU with CUDA_VISIBLE_DEVICES"});
}

void topology_findings(const NvmlFacts& nvml, std::vector<Finding>& out) {
  if (nvml.links.empty()) return;
  bool any_nvlink = false;
  for (const GpuLink& l : nvml.links) {
    any_nvlink = any_nvlink || l.nvlink == true;
    if (l.across_sockets && l.nvlink != true)
      out.push_back(
          {"topology", Status::Warn,
           fmt::format("GPUs {} and {} reach each other across the CPU sockets' interconnect, without "
                       "NVLink: collectives between them run at its speed",
                       l.a, l.b),
           "put the ranks of one tensor-parallel group on GPUs under the same PCIe switch or NVLink "
           "(nvidia-smi topo -m shows the matrix)"});
  }
  out.push_back(
      any_nvlink
          ? Finding{"topology", Status::Ok, "NVLink connects GPUs (peer-to-peer over NVLink)", ""}
          : Finding{"topology", Status::Info, "no NVLink between GPUs: peer-to-peer traffic uses PCIe", ""});
}

}  // namespace

std::vector<Finding> gpu_library_findings(const GpuStack& gpu, const BuildExpectations& expected) {
  std::vector<Finding> out;
  const size_t gpus = gpu.driver.devices.size();
  for (const CudaLibraryFacts& lib : gpu.libraries)
    out.push_back(library_finding(lib, expected_version(lib.name, expected), gpus));
  runtime_vs_driver(gpu, out);
  if (gpu.driver.load.loaded && !gpu.nvml.load.loaded)
    out.push_back(
        {"nvml", Status::Warn, fmt::format("NVML not found ({})", gpu.nvml.load.error),
         "libnvidia-ml.so.1 ships with the driver (same version as libcuda.so.1); without it there are no "
         "power, clock or utilisation readings. In a container, --gpus all mounts it"});
  else if (gpu.nvml.load.loaded && gpu.nvml.init_result != 0)
    out.push_back({"nvml", Status::Warn,
                   fmt::format("nvmlInit_v2 failed (nvmlReturn_t {})", gpu.nvml.init_result),
                   "run nvidia-smi, which reports the same error with its cause"});
  for (const NvmlDevice& d : gpu.nvml.devices) nvml_device_findings(d, out);
  topology_findings(gpu.nvml, out);
  return out;
}

}  // namespace tokenmill::doctor
