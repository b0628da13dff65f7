// tokenmill doctor: what this machine offers tokenmill (host, CPU, GPU stack), a quick
// self-test, and verdicts with fixes. Nothing GPU-related is linked: every NVIDIA library is
// loaded with dlopen, so the report works on machines without a driver.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "doctor/build_expectations.h"
#include "doctor/cpu_facts.h"
#include "doctor/findings.h"
#include "doctor/gpu_stack.h"
#include "doctor/host_facts.h"
#include "doctor/self_test.h"

namespace tokenmill::doctor {

struct DoctorOptions {
  std::filesystem::path root = "/";  // where proc/, sys/, etc/, dev/ are read
  // Where the GPU libraries are looked for: nullopt for the linker's search, else only there.
  std::optional<std::vector<std::string>> library_dirs;
  std::optional<std::string> cuda_visible_devices;
  std::optional<std::string> nvidia_visible_devices;
  BuildExpectations expected = recorded_build_expectations();
  bool require_gpu = false;  // "no usable GPU" becomes a blocking failure
  bool self_test = true;
};

// Options for this process: CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES as set, and
// TOKENMILL_DOCTOR_LIB_PATH (':'-separated directories) replacing the linker's search for the
// GPU libraries when set (set but empty: search nowhere, as on a machine without them).
DoctorOptions doctor_options_from_environment();

struct DoctorReport {
  HostFacts host;
  CpuFacts cpu;
  GpuStack gpu;
  BuildExpectations expected;
  bool require_gpu = false;
  std::vector<SelfTestResult> self_tests;          // the CPU's, then each GPU's
  std::vector<std::string> gpu_self_test_skipped;  // why a GPU the driver shows was not tested
  std::vector<Finding> findings;                   // host, cpu, gpu, libraries, self-test, in that order
};

DoctorReport run_doctor(const DoctorOptions& options);

// The first Fail finding, or nullptr when the machine is ready.
const Finding* first_blocking(const DoctorReport& report);
// 0 when ready, 1 when a finding fails.
int doctor_exit_status(const DoctorReport& report);

// The human report (sections Host, CPU, GPU stack, Self-test, Verdict), ending with the first
// blocking problem when there is one.
std::string to_text(const DoctorReport& report);
// Every fact and finding.
nlohmann::json to_json(const DoctorReport& report);

}  // namespace tokenmill::doctor
