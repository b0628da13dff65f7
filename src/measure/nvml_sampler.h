// NvmlSampler: a background thread that reads a GPU's utilisation, memory-controller
// utilisation, power, memory used and SM clock through NVML every `period` (100 ms) while a
// bench runs on it. NVML is opened with dlopen through the doctor's DynamicLibrary and its
// declarations (doctor/nvml_api.h), so the binary links no NVIDIA library.
//
// NVML averages its readings over its own sample period (utilisation: 1/6 s to 1 s, power
// on recent GPUs: 1 s), so a phase much shorter than a second is summarised coarsely.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "doctor/dynamic_library.h"
#include "doctor/nvml_api.h"
#include "measure/gpu_samples.h"

namespace tokenmill {

// An NVML device: by index (NVML counts every GPU, in PCI bus order) or by UUID ("GPU-...").
struct NvmlDeviceId {
  std::optional<unsigned> index;
  std::string uuid;  // when index is empty
};

// The NVML device of CUDA device `cuda_index`, given CUDA_VISIBLE_DEVICES (null when unset):
// entry `cuda_index` of that comma-separated list (an NVML index or a UUID), or the same
// index when unset (CUDA's default order, fastest first, is the PCI order on a machine of
// identical GPUs). nullopt when the list has no such entry, or the entry is neither.
std::optional<NvmlDeviceId> nvml_device_of_cuda(int cuda_index, const char* visible_devices);

class NvmlSampler {
 public:
  struct Options {
    NvmlDeviceId device;
    std::optional<std::vector<std::string>> library_dirs{};  // nullopt: the dynamic linker's search
    std::chrono::milliseconds period{100};
  };

  // Opens NVML, finds the device and takes a first sample; on success starts the thread.
  // Otherwise failure() says why and nothing is sampled (never an Error: the bench runs on).
  explicit NvmlSampler(const Options& options);
  ~NvmlSampler();
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;

  // True from a successful start until stop().
  bool running() const { return thread_.joinable(); }
  // Why it could not start (when not running()), or, after stop(), why it stopped early; ""
  // otherwise. (While running, the thread owns it.)
  const std::string& failure() const { return failure_; }
  const std::string& device_name() const { return device_name_; }  // NVML's name of the GPU

  // Takes a last sample, stops the thread and returns the samples in time order (empty when
  // it never started). Call once.
  std::vector<GpuSample> stop();

 private:
  // One reading, or nullopt with failure_ set.
  std::optional<GpuSample> read();
  void run();

  doctor::DynamicLibrary library_;
  std::chrono::milliseconds period_;
  std::string failure_, device_name_;
  bool initialised_ = false;
  doctor::nvml::Device device_ = nullptr;
  doctor::nvml::GetUtilization* utilization_ = nullptr;
  doctor::nvml::GetMilliwatts* power_ = nullptr;
  doctor::nvml::GetMemoryInfo* memory_ = nullptr;
  doctor::nvml::GetClock* clock_ = nullptr;

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<GpuSample> samples_;  // the thread's, until joined
  std::thread thread_;
};

}  // namespace tokenmill
