// The NVML sampler against the doctor tests' fake libnvidia-ml ("busy": one H100 at 87 %
// utilisation, 41 % memory controller, 71 W, 559 MiB used, SM clock 345 MHz), without NVML,
// and the CUDA-to-NVML device mapping.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "measure/nvml_sampler.h"

namespace tokenmill {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// GPU `device` of the libnvidia-ml.so.1 in `dir`, read every 5 ms.
NvmlSampler::Options options_in(const std::string& dir, const NvmlDeviceId& device) {
  NvmlSampler::Options options;
  options.device = device;
  options.library_dirs = std::vector<std::string>{dir};
  options.period = std::chrono::milliseconds(5);
  return options;
}

NvmlSampler::Options fake_options(const NvmlDeviceId& device) {
  return options_in(TOKENMILL_FAKE_NVML_DIR, device);
}

TEST(NvmlSampler, ReadsTheFakeGpusValuesUntilStopped) {
  NvmlSampler sampler(fake_options({0, ""}));
  ASSERT_TRUE(sampler.running()) << sampler.failure();
  EXPECT_EQ(sampler.device_name(), "NVIDIA H100 80GB HBM3");
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  const std::vector<GpuSample> samples = sampler.stop();
  // The first reading, some of the thread's, the last one.
  ASSERT_GE(samples.size(), 3u);
  for (size_t i = 0; i < samples.size(); ++i) {
    EXPECT_EQ(samples[i].gpu_utilization, 87.0) << i;
    EXPECT_EQ(samples[i].memory_utilization, 41.0) << i;
    EXPECT_EQ(samples[i].power_watts, 71.0) << i;
    EXPECT_EQ(samples[i].memory_used_bytes, uint64_t{559} << 20) << i;
    EXPECT_EQ(samples[i].sm_clock_mhz, 345.0) << i;
    if (i > 0) {
      EXPECT_GE(samples[i].at, samples[i - 1].at) << i;
    }
  }
  EXPECT_FALSE(sampler.running());
  EXPECT_EQ(sampler.failure(), "");
}

TEST(NvmlSampler, WithoutNvmlSaysWhy) {
  NvmlSampler sampler(options_in("/nonexistent", {0, ""}));
  EXPECT_FALSE(sampler.running());
  EXPECT_THAT(sampler.failure(), StartsWith("NVML is not available ("));
  EXPECT_TRUE(sampler.stop().empty());
}

TEST(NvmlSampler, AGpuNvmlDoesNotHaveSaysWhy) {
  NvmlSampler sampler(fake_options({1, ""}));  // the fake has one GPU
  EXPECT_EQ(sampler.failure(), "nvmlDeviceGetHandleByIndex_v2 returned NVML error 2");
  EXPECT_TRUE(sampler.stop().empty());
}

TEST(NvmlSampler, ALibraryWithoutAFunctionItCallsSaysWhy) {
  NvmlSampler sampler(fake_options({std::nullopt, "GPU-0"}));  // the fake has no nvmlDeviceGetHandleByUUID
  EXPECT_THAT(sampler.failure(), HasSubstr("lacks one of the NVML functions the sampler calls"));
  EXPECT_TRUE(sampler.stop().empty());
}

void expect_index(int cuda, const char* visible, unsigned nvml) {
  const auto id = nvml_device_of_cuda(cuda, visible);
  ASSERT_TRUE(id.has_value()) << cuda << " " << (visible ? visible : "(unset)");
  EXPECT_EQ(id->index, nvml) << cuda << " " << (visible ? visible : "(unset)");
}

TEST(NvmlSampler, CudaDevicesMapToNvmlThroughCudaVisibleDevices) {
  expect_index(0, nullptr, 0);
  expect_index(3, nullptr, 3);
  expect_index(0, "3,1", 3);
  expect_index(1, "3,1", 1);
  const auto uuid = nvml_device_of_cuda(1, "GPU-aaa,GPU-bbb");
  ASSERT_TRUE(uuid.has_value());
  EXPECT_FALSE(uuid->index.has_value());
  EXPECT_EQ(uuid->uuid, "GPU-bbb");
  for (const auto& [cuda, visible] : std::vector<std::pair<int, const char*>>{
           {2, "0,1"}, {0, ""}, {0, "x"}, {0, "1x"}, {1, "0,"}, {0, "-1"}, {-1, nullptr}})
    EXPECT_FALSE(nvml_device_of_cuda(cuda, visible).has_value())
        << cuda << " '" << (visible ? visible : "") << "'";
}

}  // namespace
}  // namespace tokenmill
