// What the doctor finds of the NVIDIA stack, each part loaded with dlopen (never linked):
// the driver API (libcuda.so.1), the CUDA libraries a CUDA backend needs (cudart, cuBLASLt,
// cuDNN, NCCL) and NVML (libnvidia-ml.so.1). A missing library is a fact, not an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "doctor/build_expectations.h"
#include "doctor/dynamic_library.h"
#include "doctor/version.h"

namespace tokenmill::doctor {

// Where to look: the dynamic linker's search when `dirs` is nullopt, else only these
// directories in order (none: nothing is found).
struct LibrarySearch {
  std::optional<std::vector<std::string>> dirs;
};

struct CudaDevice {
  int index = 0;
  std::string name;
  int cc_major = 0;  // compute capability, e.g. 9.0 for H100
  int cc_minor = 0;
  uint64_t memory_bytes = 0;
  int multiprocessors = 0;
};

struct CudaDriverFacts {
  LibraryLoad load;
  int init_result = 0;                  // cuInit's CUresult (0 = CUDA_SUCCESS)
  std::string init_error;               // its name, e.g. CUDA_ERROR_NO_DEVICE, when non-zero
  std::optional<Version> cuda_version;  // highest CUDA version the driver supports
  std::vector<CudaDevice> devices;
};

struct CudaLibraryFacts {
  std::string name;  // "cudart", "cublasLt", "cudnn", "nccl"
  LibraryLoad load;
  std::optional<Version> version;
};

struct NvmlDevice {
  int index = 0;
  std::string name;
  std::optional<bool> ecc_enabled;
  std::optional<bool> persistence_mode;
  std::optional<unsigned> sm_clock_mhz, max_sm_clock_mhz, memory_clock_mhz;
  std::optional<double> power_watts, power_limit_watts;
  std::optional<unsigned> gpu_utilization_percent, memory_utilization_percent;
  std::optional<uint64_t> memory_total_bytes, memory_used_bytes;
  int active_nvlinks = 0;
};

// How two GPUs reach each other (nvmlDeviceGetTopologyCommonAncestor).
struct GpuLink {
  int a = 0, b = 0;
  std::string level;            // the closest common ancestor: "same board" ... "system (across sockets)"
  bool across_sockets = false;  // the path crosses the CPU interconnect (SMP, e.g. QPI/UPI)
  std::optional<bool> nvlink;   // peer-to-peer over NVLink (nvmlDeviceGetP2PStatus)
};

struct NvmlFacts {
  LibraryLoad load;
  int init_result = 0;         // nvmlInit_v2's nvmlReturn_t
  std::string driver_version;  // e.g. "580.65.06"
  std::vector<NvmlDevice> devices;
  std::vector<GpuLink> links;  // every pair, when there are two GPUs or more
};

struct GpuStack {
  CudaDriverFacts driver;
  std::vector<CudaLibraryFacts> libraries;  // cudart, cublasLt, cudnn, nccl in that order
  NvmlFacts nvml;
};

// True when the driver initialised and shows at least one GPU.
inline bool cuda_devices_found(const GpuStack& gpu) {
  return gpu.driver.load.loaded && gpu.driver.init_result == 0 && !gpu.driver.devices.empty();
}

CudaDriverFacts probe_cuda_driver(const LibrarySearch& search);
// Each library's versioned file names are tried with the major `expected` names first.
std::vector<CudaLibraryFacts> probe_cuda_libraries(const LibrarySearch& search,
                                                   const BuildExpectations& expected);
NvmlFacts probe_nvml(const LibrarySearch& search);

}  // namespace tokenmill::doctor
