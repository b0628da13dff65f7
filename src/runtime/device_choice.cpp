#include "runtime/device_choice.h"

#include <charconv>
#include <optional>

#include "backend/cuda_availability.h"
#include "core/error.h"
#include "model/weight_placement.h"

namespace tokenmill {

namespace {

// The GPU index of "cuda" / "cuda:N", or nullopt for anything else.
std::optional<int> cuda_index(const std::string& device) {
  if (device == "cuda") return 0;
  if (!device.starts_with("cuda:")) return std::nullopt;
  int index = -1;
  const char* begin = device.data() + 5;
  const char* end = device.data() + device.size();
  const auto [ptr, ec] = std::from_chars(begin, end, index);
  if (ec != std::errc() || ptr != end || begin == end || index < 0) return std::nullopt;
  return index;
}

}  // namespace

DeviceChoice choose_device(const std::string& device, Model& model, HostWeights host_weights) {
  DeviceChoice choice;
  if (device == "cpu") {
    choice.backend = make_cpu_backend();
  } else if (device == "auto") {
    const std::string why = cuda_unavailable_reason(0);
    if (why.empty()) {
#ifdef TOKENMILL_HAS_CUDA
      choice.backend = make_cuda_backend(0);
#endif
    } else {
      choice.backend = make_cpu_backend();
      choice.note = "running on the CPU: " + why;
    }
  } else if (const std::optional<int> gpu = cuda_index(device)) {
    const std::string why = cuda_unavailable_reason(*gpu);
    if (!why.empty()) fail("--device {}: {}", device, why);
#ifdef TOKENMILL_HAS_CUDA
    choice.backend = make_cuda_backend(*gpu);
#endif
  } else {
    fail("--device {}: expected auto, cpu, cuda or cuda:N", device);
  }
  place_weights(model.weights, choice.backend->memory());
  if (host_weights == HostWeights::Copied && choice.backend->memory().is_host()) copy_mapped_weights(model);
  return choice;
}

}  // namespace tokenmill
