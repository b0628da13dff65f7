// Verdicts on the NVIDIA driver, the GPUs it shows and the variables that select them.
#include <charconv>
#include <sstream>

#include <fmt/format.h>

#include "doctor/cuda_requirements.h"
#include "doctor/findings.h"

namespace tokenmill::doctor {

namespace {

constexpr int kCudaErrorNoDevice = 100;              // CUDA_ERROR_NO_DEVICE
constexpr int kCudaErrorInsufficientDriver = 35;     // CUDA_ERROR_INSUFFICIENT_DRIVER
constexpr int kCudaErrorSystemDriverMismatch = 803;  // CUDA_ERROR_SYSTEM_DRIVER_MISMATCH

// "the NVIDIA driver >= 580.65.06 (CUDA 13.0 GA), what this build expects" or a plain phrase
// when the build recorded no CUDA version.
std::string driver_to_install(const BuildExpectations& expected) {
  if (expected.cuda)
    if (auto req = minimum_driver_for(*expected.cuda))
      return fmt::format("the NVIDIA driver >= {} ({}; this build expects CUDA {})", req->text, req->basis,
                         expected.cuda->short_text());
  return "a current NVIDIA driver";
}

// Why CUDA_VISIBLE_DEVICES hides GPUs, or "" when it is well formed. CUDA reads the list up
// to its first invalid entry: "-1", "", or a word that is not an index or a GPU-/MIG- UUID.
std::string visible_devices_problem(const std::string& value, size_t physical_gpus) {
  if (value.find_first_not_of(" \t") == std::string::npos) return "is set but empty, so CUDA sees no GPU";
  std::istringstream in(value);
  size_t position = 0;
  for (std::string entry; std::getline(in, entry, ','); ++position) {
    if (entry.starts_with("GPU-") || entry.starts_with("MIG-")) continue;
    int index = -1;
    const auto [end, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), index);
    const bool number = ec == std::errc() && end == entry.data() + entry.size();
    if (!number || index < 0)
      return position == 0 ? fmt::format("starts with '{}', so CUDA sees no GPU", entry)
                           : fmt::format("has '{}' at position {}: CUDA ignores it and every entry after it",
                                         entry, position);
    if (physical_gpus > 0 && static_cast<size_t>(index) >= physical_gpus)
      return fmt::format("names GPU {} but NVML counts {} GPUs: CUDA ignores it and every entry after it",
                         index, physical_gpus);
  }
  return "";
}

void visible_devices_findings(const GpuStack& gpu, const HostFacts& host, std::vector<Finding>& out) {
  if (host.cuda_visible_devices) {
    const std::string problem = visible_devices_problem(*host.cuda_visible_devices, gpu.nvml.devices.size());
    if (!problem.empty())
      out.push_back(
          {"CUDA_VISIBLE_DEVICES", Status::Warn,
           fmt::format("CUDA_VISIBLE_DEVICES='{}' {}", *host.cuda_visible_devices, problem),
           "unset it, or list the GPUs to use by index or UUID (CUDA_VISIBLE_DEVICES=0,1; nvidia-smi -L "
           "prints them)"});
  }
  if (host.nvidia_visible_devices &&
      (*host.nvidia_visible_devices == "void" || *host.nvidia_visible_devices == "none" ||
       host.nvidia_visible_devices->empty()))
    out.push_back(
        {"NVIDIA_VISIBLE_DEVICES", Status::Info,
         fmt::format("NVIDIA_VISIBLE_DEVICES='{}': the NVIDIA Container Toolkit exposes no GPU to this "
                     "container",
                     *host.nvidia_visible_devices),
         "start the container with --gpus all (or set NVIDIA_VISIBLE_DEVICES=all) to use a GPU"});
}

// No driver library: why, and what to do, depending on whether the GPU device exists.
Finding no_driver(const GpuStack& gpu, const HostFacts& host, const BuildExpectations& expected,
                  bool require_gpu) {
  const Status quiet = require_gpu ? Status::Fail : Status::Info;
  const std::string cpu_note = "tokenmill runs on the CPU backend";
  if (!gpu.driver.load.path.empty())  // a file loaded but it is not the driver API
    return {"driver", Status::Fail, gpu.driver.load.error,
            fmt::format("reinstall {} so that libcuda.so.1 is the driver's own library",
                        driver_to_install(expected))};
  if (!host.nvidia_device_nodes.empty()) {
    const std::string found = fmt::format("/dev/{} exists but libcuda.so.1 cannot be loaded ({}): {}",
                                          host.nvidia_device_nodes.front(), gpu.driver.load.error, cpu_note);
    if (!host.container.empty())
      return {"driver", require_gpu ? Status::Fail : Status::Warn, found,
              "the container has the GPU device but not the driver's libraries: start it through the NVIDIA "
              "Container Toolkit (docker run --gpus all), which mounts libcuda.so.1 from the host"};
    return {"driver", require_gpu ? Status::Fail : Status::Warn, found,
            fmt::format(
                "install the driver's user-space libraries of the same version as the loaded kernel module "
                "({}), or add their directory to the linker path (ldconfig)",
                driver_to_install(expected))};
  }
  if (!host.container.empty())
    return {"driver", quiet,
            fmt::format("no GPU in this {} container (no /dev/nvidia*, no libcuda.so.1): {}", host.container,
                        cpu_note),
            fmt::format(
                "to use a GPU: run the container with --gpus all on a host with the NVIDIA Container Toolkit "
                "and {}{}",
                driver_to_install(expected),
                kBuildHasCudaBackend ? "" : ", and use a tokenmill build with the CUDA backend")};
  return {"driver", quiet, fmt::format("no NVIDIA driver (libcuda.so.1 not found): {}", cpu_note),
          fmt::format("to use a GPU: install {}{}", driver_to_install(expected),
                      kBuildHasCudaBackend ? "" : " and a tokenmill build with the CUDA backend")};
}

Finding init_failure(const CudaDriverFacts& driver, const HostFacts& host, bool require_gpu) {
  const std::string found = fmt::format("cuInit failed with {} ({})", driver.init_error, driver.init_result);
  if (driver.init_result == kCudaErrorNoDevice) {
    const Status status = require_gpu ? Status::Fail : Status::Warn;
    if (host.cuda_visible_devices)
      return {"driver", status,
              fmt::format("{}: CUDA_VISIBLE_DEVICES='{}' hides every GPU", found, *host.cuda_visible_devices),
              "unset CUDA_VISIBLE_DEVICES or list valid GPU indices (nvidia-smi -L)"};
    return {"driver", status, found + ": the driver is installed but sees no GPU",
            "check nvidia-smi and dmesg (NVRM / Xid messages); in a container, start it with --gpus all"};
  }
  if (driver.init_result == kCudaErrorSystemDriverMismatch)
    return {
        "driver", Status::Fail, found + ": libcuda.so.1 and the nvidia kernel module are different versions",
        "reboot (or unload and reload the nvidia kernel modules) after a driver upgrade; in a container, the "
        "image must not ship its own libcuda.so.1"};
  if (driver.init_result == kCudaErrorInsufficientDriver)
    return {"driver", Status::Fail, found + ": the kernel driver is older than this libcuda.so.1 needs",
            "install one consistent driver (kernel module and libraries of the same version) and reboot"};
  return {"driver", Status::Fail, found, "run nvidia-smi and check dmesg for NVRM / Xid errors"};
}

Finding driver_version_finding(const Version& supported, const BuildExpectations& expected) {
  if (!expected.cuda)
    return {"driver", Status::Info,
            fmt::format("the driver supports CUDA up to {}; this build recorded no CUDA version",
                        supported.short_text()),
            ""};
  const Version& want = *expected.cuda;
  const auto req = minimum_driver_for(want);
  const std::string upgrade =
      req ? fmt::format("upgrade the driver to >= {} ({}, NVIDIA CUDA Toolkit release notes)", req->text,
                        req->basis)
          : std::string("upgrade the driver");
  if (supported.major < want.major)
    return {"driver", Status::Fail,
            fmt::format("the driver supports CUDA up to {} but this build expects CUDA {}",
                        supported.short_text(), want.short_text()),
            fmt::format("{}, or use a tokenmill build for CUDA {}", upgrade, supported.short_text())};
  if (supported.major == want.major && supported.minor < want.minor)
    return {"driver", Status::Warn,
            fmt::format("the driver supports CUDA up to {}; this build expects CUDA {}, which runs through "
                        "minor-version compatibility (no JIT of newer PTX, newer APIs missing)",
                        supported.short_text(), want.short_text()),
            upgrade + " for the full CUDA " + want.short_text() + " feature set"};
  return {"driver", Status::Ok,
          fmt::format("the driver supports CUDA up to {} (this build expects {})", supported.short_text(),
                      want.short_text()),
          ""};
}

Finding device_finding(const CudaDevice& d, const BuildExpectations& expected) {
  const int cc = d.cc_major * 10 + d.cc_minor;
  const std::string what =
      fmt::format("GPU {} {} (sm_{}, {})", d.index, d.name, cc, gib(double(d.memory_bytes)));
  const std::string area = fmt::format("gpu {}", d.index);
  if (expected.cuda)
    if (auto oldest = minimum_compute_capability(expected.cuda->major); oldest && cc < *oldest)
      return {
          area, Status::Fail,
          fmt::format("{}: CUDA {} supports sm_{} and newer only", what, expected.cuda->major, *oldest),
          fmt::format("use a tokenmill build for an older CUDA (CUDA 12 supports sm_50 and newer) or a newer "
                      "GPU")};
  if (cc < 80)
    return {
        area, Status::Warn, what + ": no BF16 tensor cores (they start with sm_80, Ampere)",
        "train in FP16 with dynamic loss scaling on this GPU (BF16, the default, runs without tensor cores); "
        "an Ampere or newer GPU (A100, RTX 30xx, L4, H100) has BF16 tensor cores"};
  return {
      area, Status::Ok,
      what + (cc >= 89 ? ": BF16 and FP8 tensor cores" : ": BF16 tensor cores (FP8 needs sm_89 or newer)"),
      ""};
}

}  // namespace

std::vector<Finding> gpu_findings(const GpuStack& gpu, const HostFacts& host,
                                  const BuildExpectations& expected, bool require_gpu) {
  std::vector<Finding> out;
  visible_devices_findings(gpu, host, out);
  const CudaDriverFacts& driver = gpu.driver;
  if (!driver.load.loaded) {
    out.push_back(no_driver(gpu, host, expected, require_gpu));
    return out;
  }
  if (driver.cuda_version) out.push_back(driver_version_finding(*driver.cuda_version, expected));
  if (driver.init_result != 0) {
    out.push_back(init_failure(driver, host, require_gpu));
    return out;
  }
  if (driver.devices.empty()) {
    out.push_back({"driver", require_gpu ? Status::Fail : Status::Warn,
                   "the driver loaded but reports no GPU",
                   "check nvidia-smi and dmesg (NVRM / Xid messages)"});
    return out;
  }
  for (const CudaDevice& d : driver.devices) out.push_back(device_finding(d, expected));
  if (kBuildHasCudaBackend)
    out.push_back(
        {"gpu", Status::Info, fmt::format("{} GPU(s) found: {}", driver.devices.size(), kGpuCommands), ""});
  else
    out.push_back(
        {"gpu", require_gpu ? Status::Fail : Status::Info,
         fmt::format("{} GPU(s) found, but this build has no CUDA backend: tokenmill runs on the CPU",
                     driver.devices.size()),
         "use a tokenmill build with the CUDA backend (configure with nvcc on the PATH)"});
  return out;
}

}  // namespace tokenmill::doctor
