// What a GPU did during a bench phase: NVML readings (measure/nvml_sampler.h) taken while it
// ran, summarised over the phase's timed span.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>

namespace tokenmill {

using BenchClock = std::chrono::steady_clock;

// One reading of the GPU.
struct GpuSample {
  BenchClock::time_point at;
  double gpu_utilization = 0;     // percent of the time a kernel ran (NVML's sample period)
  double memory_utilization = 0;  // percent of the time the memory controller was busy
  double power_watts = 0;
  uint64_t memory_used_bytes = 0;
  double sm_clock_mhz = 0;
};

struct GpuSampleSummary {
  int64_t samples = 0;
  double mean_gpu_utilization = 0, max_gpu_utilization = 0;
  double mean_memory_utilization = 0, max_memory_utilization = 0;
  double mean_power_watts = 0, max_power_watts = 0;
  double energy_joules = 0;     // mean power x the phase's seconds
  double joules_per_token = 0;  // energy_joules / the phase's tokens
  uint64_t max_memory_used_bytes = 0;
  double mean_sm_clock_mhz = 0;
};

// The samples taken in [began, ended] summarised (plain means: NVML is read at a fixed period),
// with the energy of a phase of `seconds` and `tokens` (> 0); nullopt when no sample falls in
// the span (a phase shorter than the sampling period).
std::optional<GpuSampleSummary> summarize_gpu_samples(std::span<const GpuSample> samples,
                                                      BenchClock::time_point began,
                                                      BenchClock::time_point ended, double seconds,
                                                      int64_t tokens);

}  // namespace tokenmill
