// The whole doctor on faked machines: the GPU library search points at directories of fake
// NVIDIA libraries built by tests/doctor/CMakeLists.txt (or at an empty one), and the host is
// an empty temporary root, so the verdicts do not depend on the machine running the test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "doctor/doctor.h"
#include "support/temp_dir.h"

namespace tokenmill::doctor {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using tokenmill::testing::TempDir;

const std::string kFakeGpu = TOKENMILL_FAKE_GPU_DIR;

// What a CUDA 13.0 build records at configure time.
BuildExpectations cuda13_build() {
  return {.cuda = Version{13, 0, 88},
          .cublas = Version{13, 1, 0},
          .cudnn = Version{9, 19, 0},
          .nccl = Version{2, 28, 9}};
}

class DoctorScenario : public ::testing::Test {
 protected:
  DoctorReport run(const std::string& scenario, bool require_gpu = false) {
    DoctorOptions options;
    options.root = root_.path();
    options.library_dirs =
        std::vector<std::string>{scenario.empty() ? empty_.path().string() : kFakeGpu + "/" + scenario};
    options.expected = cuda13_build();
    options.require_gpu = require_gpu;
    options.self_test = false;
    options.cuda_visible_devices = cuda_visible_devices_;
    return run_doctor(options);
  }

  static const Finding& area(const DoctorReport& report, const std::string& name) {
    const auto it = std::find_if(report.findings.begin(), report.findings.end(),
                                 [&](const Finding& f) { return f.area == name; });
    if (it == report.findings.end()) throw std::runtime_error("no finding for " + name);
    return *it;
  }

  // The one "driver" verdict of a machine without a usable driver library.
  void expect_driver(Status status, const std::string& found, const std::string& fix) {
    const DoctorReport report = run("");
    const Finding& driver = area(report, "driver");
    EXPECT_EQ(driver.status, status);
    EXPECT_THAT(driver.found, HasSubstr(found));
    EXPECT_THAT(driver.fix, HasSubstr(fix));
  }

  TempDir root_;
  TempDir empty_;
  std::optional<std::string> cuda_visible_devices_;
};

TEST_F(DoctorScenario, NoLibrariesMeansCpuOnlyAndReady) {
  const DoctorReport report = run("");
  EXPECT_FALSE(report.gpu.driver.load.loaded);
  for (const CudaLibraryFacts& lib : report.gpu.libraries) EXPECT_FALSE(lib.load.loaded) << lib.name;
  expect_driver(Status::Info, "no NVIDIA driver (libcuda.so.1 not found): tokenmill runs on the CPU backend",
                "install the NVIDIA driver >= 580.65.06");
  EXPECT_EQ(doctor_exit_status(report), 0);
  EXPECT_THAT(to_text(report), HasSubstr("ready for CPU work"));
  EXPECT_TRUE(to_json(report)["ready"].get<bool>());
}

TEST_F(DoctorScenario, RequireGpuWithoutOneIsBlocking) {
  const DoctorReport report = run("", /*require_gpu=*/true);
  EXPECT_EQ(doctor_exit_status(report), 1);
  ASSERT_NE(first_blocking(report), nullptr);
  EXPECT_EQ(first_blocking(report)->area, "driver");
  // The first blocking problem is the last thing printed.
  const std::string text = to_text(report);
  EXPECT_THAT(text, EndsWith(fmt::format("not ready (driver): {}\n  fix: {}\n", first_blocking(report)->found,
                                         first_blocking(report)->fix)));
}

TEST_F(DoctorScenario, ContainerWithoutGpuSaysHowToPassOneIn) {
  root_.write(".dockerenv", "");
  expect_driver(Status::Info, "no GPU in this docker container", "--gpus all");
}

TEST_F(DoctorScenario, GpuDeviceWithoutDriverLibrariesInAContainer) {
  root_.write(".dockerenv", "");
  std::filesystem::create_directories(root_.path() / "dev");
  root_.write("dev/nvidia0", "");
  expect_driver(Status::Warn, "/dev/nvidia0 exists but libcuda.so.1 cannot be loaded",
                "NVIDIA Container Toolkit");
}

TEST_F(DoctorScenario, GpuDeviceWithoutDriverLibrariesOnTheHost) {
  std::filesystem::create_directories(root_.path() / "dev");
  root_.write("dev/nvidia0", "");
  expect_driver(Status::Warn, "/dev/nvidia0 exists but libcuda.so.1 cannot be loaded",
                "user-space libraries");
}

TEST_F(DoctorScenario, OldDriverAndLibrariesFailWithFixes) {
  const DoctorReport report = run("old");
  ASSERT_TRUE(report.gpu.driver.load.loaded) << report.gpu.driver.load.error;
  ASSERT_EQ(report.gpu.driver.devices.size(), 1u);
  EXPECT_EQ(report.gpu.driver.devices[0].name, "Tesla T4");

  const Finding& driver = area(report, "driver");
  EXPECT_EQ(driver.status, Status::Fail);
  EXPECT_THAT(driver.found, HasSubstr("supports CUDA up to 11.8 but this build expects CUDA 13.0"));
  EXPECT_THAT(driver.fix, HasSubstr("upgrade the driver to >= 580.65.06 (CUDA 13.0 GA"));
  EXPECT_THAT(driver.fix, HasSubstr("or use a tokenmill build for CUDA 11.8"));

  const Finding& gpu = area(report, "gpu 0");
  EXPECT_EQ(gpu.status, Status::Warn);
  EXPECT_THAT(gpu.found, HasSubstr("sm_75"));
  EXPECT_THAT(gpu.found, HasSubstr("no BF16 tensor cores"));

  const Finding& cudnn = area(report, "cudnn");
  EXPECT_EQ(cudnn.status, Status::Fail);
  EXPECT_THAT(cudnn.found, HasSubstr("cuDNN 8.9.7 found at"));
  EXPECT_THAT(cudnn.found, HasSubstr("expects cuDNN 9 (9.19.0)"));
  EXPECT_THAT(cudnn.fix, HasSubstr("install cuDNN 9.x (>= 9.19.0)"));
  EXPECT_EQ(area(report, "cublasLt").status, Status::Fail);
  EXPECT_THAT(area(report, "cublasLt").found, HasSubstr("cuBLASLt 11.11.3"));
  EXPECT_EQ(area(report, "cudart").status, Status::Fail);
  EXPECT_EQ(area(report, "nccl").status, Status::Info);  // one GPU: no collectives needed
  EXPECT_EQ(area(report, "nvml").status, Status::Warn);

  EXPECT_EQ(doctor_exit_status(report), 1);
  EXPECT_EQ(first_blocking(report)->area, "driver");
  EXPECT_THAT(to_text(report), HasSubstr("\nnot ready (driver): the driver supports CUDA up to 11.8"));
  const auto json = to_json(report);
  EXPECT_EQ(json["gpu"]["libraries"]["cudnn"]["version"], "8.9.7");
  EXPECT_EQ(json["exit_status"], 1);
  EXPECT_EQ(json["first_blocking"]["area"], "driver");
}

TEST_F(DoctorScenario, CurrentStackIsOk) {
  const DoctorReport report = run("good");
  ASSERT_EQ(report.gpu.driver.devices.size(), 2u);
  EXPECT_EQ(area(report, "driver").status, Status::Ok);
  const Finding& gpu = area(report, "gpu 0");
  EXPECT_EQ(gpu.status, Status::Ok);
  EXPECT_THAT(gpu.found, HasSubstr("BF16 and FP8 tensor cores"));
  for (const char* lib : {"cudart", "cublasLt", "cudnn", "nccl"})
    EXPECT_EQ(area(report, lib).status, Status::Ok) << lib;
  EXPECT_EQ(report.gpu.nvml.driver_version, "580.65.06");
  ASSERT_EQ(report.gpu.nvml.devices.size(), 2u);
  EXPECT_EQ(report.gpu.nvml.devices[0].persistence_mode, true);
  EXPECT_EQ(report.gpu.nvml.devices[0].active_nvlinks, 18);
  EXPECT_DOUBLE_EQ(*report.gpu.nvml.devices[0].power_limit_watts, 700.0);
  ASSERT_EQ(report.gpu.nvml.links.size(), 1u);
  EXPECT_EQ(report.gpu.nvml.links[0].nvlink, true);
  EXPECT_EQ(area(report, "topology").status, Status::Ok);
  EXPECT_EQ(area(report, "gpu").status, Status::Info);
  for (const Finding& f : report.findings) EXPECT_NE(f.status, Status::Fail) << f.area << ": " << f.found;
  EXPECT_EQ(doctor_exit_status(report), 0);
}

TEST_F(DoctorScenario, RequireGpuFailsOnlyWhenTheBuildHasNoCudaBackend) {
  const DoctorReport report = run("good", /*require_gpu=*/true);
  EXPECT_EQ(doctor_exit_status(report), kBuildHasCudaBackend ? 0 : 1);
  if (!kBuildHasCudaBackend) {
    EXPECT_THAT(first_blocking(report)->found, HasSubstr("no CUDA backend"));
  }
}

TEST_F(DoctorScenario, VisibleDevicesMinusOneHidesEveryGpu) {
  cuda_visible_devices_ = "-1";
  const DoctorReport report = run("nodevice");
  EXPECT_EQ(area(report, "CUDA_VISIBLE_DEVICES").status, Status::Warn);
  // The driver's findings: its CUDA version (ok), then cuInit's failure.
  const Finding& driver = *std::find_if(report.findings.rbegin(), report.findings.rend(),
                                        [](const Finding& f) { return f.area == "driver"; });
  EXPECT_EQ(driver.status, Status::Warn);
  EXPECT_THAT(driver.found, HasSubstr("CUDA_ERROR_NO_DEVICE"));
  EXPECT_THAT(driver.found, HasSubstr("hides every GPU"));
  EXPECT_EQ(doctor_exit_status(report), 0);
}

TEST_F(DoctorScenario, ALibcudaThatIsNotTheDriverFails) {
  const DoctorReport report = run("broken");
  const Finding& driver = area(report, "driver");
  EXPECT_EQ(driver.status, Status::Fail);
  EXPECT_THAT(driver.found, HasSubstr("not a CUDA driver library"));
  EXPECT_EQ(doctor_exit_status(report), 1);
}

TEST_F(DoctorScenario, UnrecordedExpectationsAreSaidPlainly) {
  DoctorOptions options;
  options.root = root_.path();
  options.library_dirs = std::vector<std::string>{kFakeGpu + "/good"};
  options.expected = BuildExpectations{};
  options.self_test = false;
  const DoctorReport report = run_doctor(options);
  EXPECT_THAT(to_text(report), HasSubstr("CUDA not recorded, cuBLAS not recorded"));
  EXPECT_EQ(area(report, "driver").status, Status::Info);
  EXPECT_THAT(area(report, "cudnn").found, HasSubstr("recorded no expected version"));
  EXPECT_TRUE(to_json(report)["gpu"]["build_expects"]["cuda"].is_null());
}

}  // namespace
}  // namespace tokenmill::doctor
