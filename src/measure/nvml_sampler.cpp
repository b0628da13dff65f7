#include "measure/nvml_sampler.h"

#include <array>
#include <charconv>
#include <string_view>

#include <fmt/format.h>

namespace tokenmill {

using namespace doctor::nvml;  // the C API's signatures and constants

std::optional<NvmlDeviceId> nvml_device_of_cuda(int cuda_index, const char* visible_devices) {
  if (cuda_index < 0) return std::nullopt;
  if (visible_devices == nullptr) return NvmlDeviceId{static_cast<unsigned>(cuda_index), ""};
  std::string_view list(visible_devices);
  for (int i = 0; i < cuda_index; ++i) {
    const size_t comma = list.find(',');
    if (comma == std::string_view::npos) return std::nullopt;
    list.remove_prefix(comma + 1);
  }
  const std::string_view entry = list.substr(0, list.find(','));
  if (entry.starts_with("GPU-") || entry.starts_with("MIG-"))
    return NvmlDeviceId{std::nullopt, std::string(entry)};
  unsigned index = 0;
  const auto [end, error] = std::from_chars(entry.data(), entry.data() + entry.size(), index);
  if (entry.empty() || error != std::errc() || end != entry.data() + entry.size()) return std::nullopt;
  return NvmlDeviceId{index, ""};
}

namespace {

// "nvmlX returned N" for a failed call, "" when it succeeded.
std::string call_error(const char* name, int result) {
  return result == 0 ? "" : fmt::format("{} returned NVML error {}", name, result);
}

}  // namespace

NvmlSampler::NvmlSampler(const Options& options)
    : library_(doctor::DynamicLibrary::open(std::array<std::string, 1>{"libnvidia-ml.so.1"},
                                            options.library_dirs)),
      period_(options.period) {
  if (!library_.loaded()) {
    failure_ = "NVML is not available (" + library_.error() + ")";
    return;
  }
  auto* init = library_.function<Init>("nvmlInit_v2");
  auto* by_index = library_.function<GetHandle>("nvmlDeviceGetHandleByIndex_v2");
  auto* by_uuid = library_.function<GetHandleByUuid>("nvmlDeviceGetHandleByUUID");
  auto* name = library_.function<GetName>("nvmlDeviceGetName");
  utilization_ = library_.function<GetUtilization>("nvmlDeviceGetUtilizationRates");
  power_ = library_.function<GetMilliwatts>("nvmlDeviceGetPowerUsage");
  memory_ = library_.function<GetMemoryInfo>("nvmlDeviceGetMemoryInfo");
  clock_ = library_.function<GetClock>("nvmlDeviceGetClockInfo");
  if (init == nullptr || (options.device.index ? by_index == nullptr : by_uuid == nullptr) ||
      utilization_ == nullptr || power_ == nullptr || memory_ == nullptr || clock_ == nullptr) {
    failure_ = library_.path() + " lacks one of the NVML functions the sampler calls";
    return;
  }
  failure_ = call_error("nvmlInit_v2", init());
  if (!failure_.empty()) return;
  initialised_ = true;
  failure_ = options.device.index
                 ? call_error("nvmlDeviceGetHandleByIndex_v2", by_index(*options.device.index, &device_))
                 : call_error("nvmlDeviceGetHandleByUUID", by_uuid(options.device.uuid.c_str(), &device_));
  if (!failure_.empty()) return;
  std::array<char, 96> text{};
  if (name != nullptr && name(device_, text.data(), text.size()) == 0) device_name_ = text.data();
  const std::optional<GpuSample> first = read();
  if (!first) return;
  samples_.push_back(*first);
  thread_ = std::thread([this] { run(); });
}

NvmlSampler::~NvmlSampler() {
  if (thread_.joinable()) stop();
  if (initialised_)
    if (auto* shutdown = library_.function<Shutdown>("nvmlShutdown")) shutdown();
}

std::optional<GpuSample> NvmlSampler::read() {
  Utilization rates{};
  unsigned milliwatts = 0, mhz = 0;
  Memory memory{};
  failure_ = call_error("nvmlDeviceGetUtilizationRates", utilization_(device_, &rates));
  if (failure_.empty()) failure_ = call_error("nvmlDeviceGetPowerUsage", power_(device_, &milliwatts));
  if (failure_.empty()) failure_ = call_error("nvmlDeviceGetMemoryInfo", memory_(device_, &memory));
  if (failure_.empty()) failure_ = call_error("nvmlDeviceGetClockInfo", clock_(device_, kClockSm, &mhz));
  if (!failure_.empty()) return std::nullopt;
  return GpuSample{BenchClock::now(),
                   static_cast<double>(rates.gpu),
                   static_cast<double>(rates.memory),
                   milliwatts / 1000.0,
                   memory.used,
                   static_cast<double>(mhz)};
}

void NvmlSampler::run() {
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, period_, [this] { return stopping_; })) {
    const std::optional<GpuSample> sample = read();
    if (!sample) return;  // failure_ says why
    samples_.push_back(*sample);
  }
}

std::vector<GpuSample> NvmlSampler::stop() {
  if (!thread_.joinable()) return std::move(samples_);
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
  if (failure_.empty())
    if (const std::optional<GpuSample> last = read()) samples_.push_back(*last);
  return std::move(samples_);
}

}  // namespace tokenmill
