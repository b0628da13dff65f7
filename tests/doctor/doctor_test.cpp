// The doctor's tables and decoders with hand-checked values: library version encodings,
// NVIDIA's driver table, CUDA_VISIBLE_DEVICES checks, the host/CPU verdicts and the
// self-test against the float64 reference.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "doctor/cuda_requirements.h"
#include "doctor/doctor.h"
#include "doctor/version.h"

namespace tokenmill::doctor {
namespace {

using ::testing::HasSubstr;

const Finding* find_area(const std::vector<Finding>& findings, const std::string& area) {
  const auto it =
      std::find_if(findings.begin(), findings.end(), [&](const Finding& f) { return f.area == area; });
  return it == findings.end() ? nullptr : &*it;
}

TEST(DoctorVersion, DecodesEachLibraryEncoding) {
  EXPECT_EQ(cuda_version_from_code(11080), (Version{11, 8, 0}));
  EXPECT_EQ(cuda_version_from_code(13000), (Version{13, 0, 0}));
  EXPECT_EQ(cudnn_version_from_code(8907), (Version{8, 9, 7}));    // cuDNN 8: 1000*M + 100*m + p
  EXPECT_EQ(cudnn_version_from_code(91900), (Version{9, 19, 0}));  // cuDNN 9: 10000*M + 100*m + p
  EXPECT_EQ(nccl_version_from_code(2708), (Version{2, 7, 8}));     // before 2.9
  EXPECT_EQ(nccl_version_from_code(22809), (Version{2, 28, 9}));
  EXPECT_EQ(cublas_version_from_code(130100), (Version{13, 1, 0}));
  EXPECT_EQ(cublas_version_from_code(111103), (Version{11, 11, 3}));
}

TEST(DoctorVersion, ParsesDottedVersionsOnly) {
  EXPECT_EQ(parse_version("13.0.88"), (Version{13, 0, 88}));
  EXPECT_EQ(parse_version("580.65.06"), (Version{580, 65, 6}));
  EXPECT_EQ(parse_version("9"), (Version{9, 0, 0}));
  EXPECT_EQ(parse_version(""), std::nullopt);
  EXPECT_EQ(parse_version("13.x"), std::nullopt);
  EXPECT_EQ(parse_version("1.2.3.4"), std::nullopt);
  EXPECT_EQ(parse_version("13."), std::nullopt);
  EXPECT_EQ((Version{13, 0, 88}).short_text(), "13.0");
}

TEST(DoctorRequirements, DriverTableFollowsNvidiaReleaseNotes) {
  const auto cuda13 = minimum_driver_for({13, 0, 88});
  ASSERT_TRUE(cuda13);
  EXPECT_EQ(cuda13->text, "580.65.06");
  EXPECT_EQ(cuda13->basis, "CUDA 13.0 GA");
  EXPECT_EQ(minimum_driver_for({12, 0, 0})->text, "525.60.13");
  EXPECT_EQ(minimum_driver_for({12, 4, 1})->text, "550.54.14");
  EXPECT_EQ(minimum_driver_for({11, 8, 0})->text, "520.61.05");
  // A minor release not in the table: the floor of minor-version compatibility.
  const auto cuda13_2 = minimum_driver_for({13, 2, 0});
  ASSERT_TRUE(cuda13_2);
  EXPECT_EQ(cuda13_2->text, "580.65.06");
  EXPECT_THAT(cuda13_2->basis, HasSubstr("minor-version compatibility"));
  EXPECT_EQ(minimum_driver_for({12, 7, 0})->text, "525.60.13");
  EXPECT_EQ(minimum_driver_for({10, 2, 0}), std::nullopt);
  EXPECT_LT(parse_version("575.57.08"), minimum_driver_for({13, 0, 0})->driver);
}

TEST(DoctorRequirements, OldestArchitecturePerCudaMajor) {
  EXPECT_EQ(minimum_compute_capability(13), 75);
  EXPECT_EQ(minimum_compute_capability(12), 50);
  EXPECT_EQ(minimum_compute_capability(11), 35);
  EXPECT_EQ(minimum_compute_capability(9), std::nullopt);
}

// The GPU findings for a host whose only fact is CUDA_VISIBLE_DEVICES, no driver.
std::vector<Finding> with_visible_devices(const std::string& value) {
  HostFacts host;
  host.cuda_visible_devices = value;
  return gpu_findings(GpuStack{}, host, BuildExpectations{}, false);
}

TEST(DoctorVisibleDevices, WarnsWhenTheListHidesGpus) {
  for (const char* value : {"", " ", "-1", "NoDevFiles"}) {
    const std::vector<Finding> findings = with_visible_devices(value);
    const Finding* f = find_area(findings, "CUDA_VISIBLE_DEVICES");
    ASSERT_NE(f, nullptr) << "'" << value << "'";
    EXPECT_EQ(f->status, Status::Warn);
    EXPECT_THAT(f->found, HasSubstr("sees no GPU"));
    EXPECT_THAT(f->fix, HasSubstr("unset it"));
  }
  const std::vector<Finding> findings = with_visible_devices("0,x,1");
  const Finding* middle = find_area(findings, "CUDA_VISIBLE_DEVICES");
  ASSERT_NE(middle, nullptr);
  EXPECT_THAT(middle->found, HasSubstr("'x' at position 1"));
  for (const char* fine : {"0", "0,1", "GPU-8a1f6c3e-0000-1111-2222-333344445555", "MIG-1234,1"})
    EXPECT_EQ(find_area(with_visible_devices(fine), "CUDA_VISIBLE_DEVICES"), nullptr) << fine;
}

TEST(DoctorVisibleDevices, WarnsAboutAnIndexBeyondTheGpusNvmlCounts) {
  HostFacts host;
  host.cuda_visible_devices = "0,4";
  GpuStack gpu;
  gpu.nvml.devices.resize(2);
  const std::vector<Finding> findings = gpu_findings(gpu, host, BuildExpectations{}, false);
  const Finding* f = find_area(findings, "CUDA_VISIBLE_DEVICES");
  ASSERT_NE(f, nullptr);
  EXPECT_THAT(f->found, HasSubstr("names GPU 4 but NVML counts 2 GPUs"));
}

// A host with 64 GiB of RAM and `cpus` CPUs, in a cgroup with these limits (nullopt: none).
HostFacts limited_host(std::optional<double> memory_gib, int cpus, std::optional<double> cpu_quota) {
  HostFacts host;
  host.memory_total_bytes = 64ull << 30;
  host.memory_limit_bytes = {.known = true,
                             .value = memory_gib ? std::optional(*memory_gib * (1ull << 30)) : std::nullopt};
  host.online_cpus = host.affinity_cpus = cpus;
  host.cpu_limit = {.known = true, .value = cpu_quota};
  return host;
}

TEST(DoctorHostFindings, SmallContainerLimitsWarnWithTheFix) {
  const std::vector<Finding> findings = host_findings(limited_host(4, 64, 2.0));
  const Finding* memory = find_area(findings, "memory");
  ASSERT_NE(memory, nullptr);
  EXPECT_EQ(memory->status, Status::Warn);
  EXPECT_THAT(memory->found, HasSubstr("4.00 GiB of 64.00 GiB"));
  EXPECT_THAT(memory->fix, HasSubstr("--memory"));
  const Finding* quota = find_area(findings, "cpu quota");
  ASSERT_NE(quota, nullptr);
  EXPECT_EQ(quota->status, Status::Warn);
  EXPECT_THAT(quota->fix, HasSubstr("-t 2"));
}

TEST(DoctorHostFindings, GenerousOrAbsentLimitsDoNotWarn) {
  for (const Finding& f : host_findings(limited_host(48, 8, std::nullopt)))
    EXPECT_NE(f.status, Status::Warn) << f.found;
  for (const Finding& f : host_findings(limited_host(std::nullopt, 8, 8.0)))
    EXPECT_NE(f.status, Status::Warn) << f.found;
}

TEST(DoctorHostFindings, HugePagesOffWarnWithTheFixOnElseOk) {
  HostFacts host = limited_host(std::nullopt, 8, std::nullopt);
  EXPECT_EQ(find_area(host_findings(host), "huge pages"), nullptr);  // unknown: nothing to say
  host.transparent_hugepages = "never";
  const std::vector<Finding> off = host_findings(host);
  const Finding* never = find_area(off, "huge pages");
  ASSERT_NE(never, nullptr);
  EXPECT_EQ(never->status, Status::Warn);
  EXPECT_THAT(never->fix, HasSubstr("echo madvise | sudo tee /sys/kernel/mm/transparent_hugepage/enabled"));
  for (const char* mode : {"madvise", "always"}) {
    host.transparent_hugepages = mode;
    const std::vector<Finding> on = host_findings(host);
    const Finding* f = find_area(on, "huge pages");
    ASSERT_NE(f, nullptr) << mode;
    EXPECT_EQ(f->status, Status::Ok) << mode;
    EXPECT_THAT(f->found, HasSubstr(mode));
  }
}

TEST(DoctorCpuFindings, ReportsTheIsaTheBackendUses) {
  CpuFacts avx2;
  avx2.features.avx2 = avx2.features.fma = true;
  avx2.isa = "avx2";
  const std::vector<Finding> narrow_findings = cpu_findings(avx2);
  const Finding* isa = find_area(narrow_findings, "cpu isa");
  ASSERT_NE(isa, nullptr);
  EXPECT_THAT(isa->found, HasSubstr("AVX2 kernels"));
  EXPECT_EQ(find_area(narrow_findings, "cpu vnni"), nullptr);

  CpuFacts wide = avx2;
  wide.features.avx512f = wide.features.avx512bw = wide.features.avx512vl = wide.features.avx512dq = true;
  wide.isa = "avx512";
  const std::vector<Finding> wide_findings = cpu_findings(wide);
  EXPECT_EQ(find_area(wide_findings, "cpu isa")->status, Status::Ok);
  EXPECT_THAT(find_area(wide_findings, "cpu vnni")->found, HasSubstr("AVX2 kernels"));
  EXPECT_THAT(find_area(wide_findings, "cpu amx")->found,
              HasSubstr("no AMX-BF16: bf16-weight prefill runs on AVX-512"));

  CpuFacts amx = wide;
  amx.features.avx512bf16 = amx.features.amx_tile = amx.features.amx_bf16 = true;
  EXPECT_EQ(find_area(cpu_findings(amx), "cpu amx")->status, Status::Warn);
  amx.amx_granted = true;
  EXPECT_THAT(find_area(cpu_findings(amx), "cpu isa")->found, HasSubstr("caps the CPU backend at AVX-512"));
  amx.isa = "amx";
  const std::vector<Finding> amx_findings = cpu_findings(amx);
  EXPECT_EQ(find_area(amx_findings, "cpu isa")->status, Status::Ok);
  EXPECT_EQ(find_area(amx_findings, "cpu amx")->status, Status::Ok);
  EXPECT_NE(find_area(amx_findings, "cpu vnni"), nullptr);

  CpuFacts refused;
  refused.isa_error = "TOKENMILL_CPU_ISA=avx512 but this CPU lacks it";
  const std::vector<Finding> refused_findings = cpu_findings(refused);
  EXPECT_EQ(find_area(refused_findings, "cpu isa")->status, Status::Fail);
}

TEST(DoctorSelfTest, CpuKernelsMatchTheReference) {
  const std::vector<SelfTestResult> results = run_cpu_self_test();
  ASSERT_EQ(results.size(), 2u);
  for (const SelfTestResult& r : results) {
    EXPECT_TRUE(r.passed) << r.name << ": " << r.max_relative_error;
    EXPECT_LE(r.max_relative_error, 1e-5) << r.name;
    EXPECT_GT(r.max_relative_error, 0.0) << r.name << ": f32 kernels cannot match float64 exactly";
    EXPECT_GT(r.gflops_per_s, 0.0) << r.name;
    EXPECT_GT(r.gbytes_per_s, 0.0) << r.name;
  }
  EXPECT_THAT(results[0].name, HasSubstr("gemm 512x512x512"));
}

TEST(DoctorSelfTest, AWrongResultIsBlocking) {
  SelfTestResult bad;
  bad.name = "gemm";
  bad.max_relative_error = 0.5;
  bad.tolerance = 1e-5;
  const std::vector<Finding> findings = self_test_findings({bad}, {});
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].status, Status::Fail);
  EXPECT_THAT(findings[0].found, HasSubstr("the CPU kernels compute wrong results"));
  bad.device = "cuda:0 (NVIDIA H200, sm_90)";
  EXPECT_THAT(self_test_findings({bad}, {})[0].found, HasSubstr("the GPU computes wrong results"));
  const std::vector<Finding> skipped = self_test_findings({}, {"GPU 0: no driver"});
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].status, Status::Info);
  EXPECT_THAT(skipped[0].found, HasSubstr("GPU self-test skipped: GPU 0: no driver"));
}

TEST(DoctorSelfTest, AGpuTheBuildCannotTestIsSkippedWithTheReason) {
  std::vector<std::string> skipped;
  const std::vector<SelfTestResult> results = run_gpu_self_test(1, skipped);
  if (!results.empty()) GTEST_SKIP() << "this machine has a usable GPU";  // scripts/gpu-check.sh territory
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_FALSE(skipped[0].empty());
}

}  // namespace
}  // namespace tokenmill::doctor
