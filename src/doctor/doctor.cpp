#include "doctor/doctor.h"

#include <cstdlib>
#include <sstream>

namespace tokenmill::doctor {

namespace {

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::optional<std::string>(value) : std::nullopt;
}

void append(std::vector<Finding>& to, std::vector<Finding> from) {
  to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
}

}  // namespace

DoctorOptions doctor_options_from_environment() {
  DoctorOptions options;
  options.cuda_visible_devices = env("CUDA_VISIBLE_DEVICES");
  options.nvidia_visible_devices = env("NVIDIA_VISIBLE_DEVICES");
  if (auto dirs = env("TOKENMILL_DOCTOR_LIB_PATH")) {
    options.library_dirs.emplace();
    std::istringstream in(*dirs);
    for (std::string dir; std::getline(in, dir, ':');)
      if (!dir.empty()) options.library_dirs->push_back(dir);
  }
  return options;
}

DoctorReport run_doctor(const DoctorOptions& options) {
  DoctorReport report;
  report.host = probe_host({.root = options.root,
                            .cuda_visible_devices = options.cuda_visible_devices,
                            .nvidia_visible_devices = options.nvidia_visible_devices});
  report.cpu = probe_cpu();
  const LibrarySearch search{.dirs = options.library_dirs};
  report.gpu.driver = probe_cuda_driver(search);
  report.gpu.libraries = probe_cuda_libraries(search, options.expected);
  report.gpu.nvml = probe_nvml(search);
  report.expected = options.expected;
  report.require_gpu = options.require_gpu;
  if (options.self_test && report.cpu.isa_error.empty()) report.self_tests = run_cpu_self_test();
  if (options.self_test && cuda_devices_found(report.gpu)) {
    const int gpus = static_cast<int>(report.gpu.driver.devices.size());
    for (SelfTestResult& r : run_gpu_self_test(gpus, report.gpu_self_test_skipped))
      report.self_tests.push_back(std::move(r));
  }

  append(report.findings, host_findings(report.host));
  append(report.findings, cpu_findings(report.cpu));
  append(report.findings, gpu_findings(report.gpu, report.host, report.expected, report.require_gpu));
  append(report.findings, gpu_library_findings(report.gpu, report.expected));
  append(report.findings, self_test_findings(report.self_tests, report.gpu_self_test_skipped));
  return report;
}

const Finding* first_blocking(const DoctorReport& report) {
  for (const Finding& f : report.findings)
    if (f.status == Status::Fail) return &f;
  return nullptr;
}

int doctor_exit_status(const DoctorReport& report) { return first_blocking(report) == nullptr ? 0 : 1; }

}  // namespace tokenmill::doctor
