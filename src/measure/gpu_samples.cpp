#include "measure/gpu_samples.h"

#include <algorithm>

namespace tokenmill {

std::optional<GpuSampleSummary> summarize_gpu_samples(std::span<const GpuSample> samples,
                                                      BenchClock::time_point began,
                                                      BenchClock::time_point ended, double seconds,
                                                      int64_t tokens) {
  GpuSampleSummary s;
  double gpu = 0, memory = 0, watts = 0, clock = 0;
  for (const GpuSample& sample : samples) {
    if (sample.at < began || sample.at > ended) continue;
    ++s.samples;
    gpu += sample.gpu_utilization;
    memory += sample.memory_utilization;
    watts += sample.power_watts;
    clock += sample.sm_clock_mhz;
    s.max_gpu_utilization = std::max(s.max_gpu_utilization, sample.gpu_utilization);
    s.max_memory_utilization = std::max(s.max_memory_utilization, sample.memory_utilization);
    s.max_power_watts = std::max(s.max_power_watts, sample.power_watts);
    s.max_memory_used_bytes = std::max(s.max_memory_used_bytes, sample.memory_used_bytes);
  }
  if (s.samples == 0) return std::nullopt;
  const auto n = static_cast<double>(s.samples);
  s.mean_gpu_utilization = gpu / n;
  s.mean_memory_utilization = memory / n;
  s.mean_power_watts = watts / n;
  s.mean_sm_clock_mhz = clock / n;
  s.energy_joules = s.mean_power_watts * seconds;
  s.joules_per_token = s.energy_joules / static_cast<double>(tokens);
  return s;
}

}  // namespace tokenmill
