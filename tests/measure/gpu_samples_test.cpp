// The summary of a phase's GPU readings, with hand numbers.
#include <chrono>
#include <vector>

#include <gtest/gtest.h>

#include "measure/gpu_samples.h"

namespace tokenmill {
namespace {

using std::chrono::milliseconds;

const BenchClock::time_point kBegan = BenchClock::time_point{} + std::chrono::seconds(10);
const BenchClock::time_point kEnded = kBegan + milliseconds(250);

GpuSample at(milliseconds offset, double gpu, double memory, double watts, uint64_t used, double mhz) {
  return {kBegan + offset, gpu, memory, watts, used, mhz};
}

TEST(GpuSamples, SummarisesTheSamplesInsideTheSpan) {
  const std::vector<GpuSample> samples = {
      at(milliseconds(-100), 0, 0, 1000, 9'000, 100),  // before: left out
      at(milliseconds(0), 80, 30, 200, 1'000, 1500),   // at the start: in
      at(milliseconds(100), 100, 50, 400, 3'000, 1900),
      at(milliseconds(250), 90, 40, 300, 2'000, 1700),  // at the end: in
      at(milliseconds(300), 0, 0, 1000, 9'000, 100),    // after: left out
  };
  const auto s = summarize_gpu_samples(samples, kBegan, kEnded, 0.25, 500);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->samples, 3);
  EXPECT_DOUBLE_EQ(s->mean_gpu_utilization, 90.0);  // (80 + 100 + 90) / 3
  EXPECT_DOUBLE_EQ(s->max_gpu_utilization, 100.0);
  EXPECT_DOUBLE_EQ(s->mean_memory_utilization, 40.0);
  EXPECT_DOUBLE_EQ(s->max_memory_utilization, 50.0);
  EXPECT_DOUBLE_EQ(s->mean_power_watts, 300.0);  // (200 + 400 + 300) / 3
  EXPECT_DOUBLE_EQ(s->max_power_watts, 400.0);
  EXPECT_DOUBLE_EQ(s->energy_joules, 75.0);     // 300 W x 0.25 s
  EXPECT_DOUBLE_EQ(s->joules_per_token, 0.15);  // 75 J / 500 tokens
  EXPECT_EQ(s->max_memory_used_bytes, 3'000u);
  EXPECT_DOUBLE_EQ(s->mean_sm_clock_mhz, 1700.0);
}

TEST(GpuSamples, EnergyIsOverThePhaseSecondsNotTheSpan) {
  // A train phase: the span holds its 2 timed steps, seconds and tokens are one step's.
  const std::vector<GpuSample> samples = {at(milliseconds(50), 50, 10, 250, 1, 1000)};
  const auto s = summarize_gpu_samples(samples, kBegan, kEnded, 0.125, 1000);
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(s->energy_joules, 31.25);  // 250 W x 0.125 s
  EXPECT_DOUBLE_EQ(s->joules_per_token, 0.03125);
}

TEST(GpuSamples, NoSampleInTheSpanIsNoSummary) {
  const std::vector<GpuSample> samples = {at(milliseconds(-1), 50, 10, 250, 1, 1000),
                                          at(milliseconds(251), 50, 10, 250, 1, 1000)};
  EXPECT_FALSE(summarize_gpu_samples(samples, kBegan, kEnded, 0.25, 10).has_value());
  EXPECT_FALSE(summarize_gpu_samples({}, kBegan, kEnded, 0.25, 10).has_value());
}

}  // namespace
}  // namespace tokenmill
