#include "runtime/device_choice.h"

#include <fmt/format.h>

#include <charconv>
#include <optional>

#include "backend/cuda_availability.h"
#include "core/error.h"
#include "model/weight_placement.h"

namespace tokenmill {

namespace {

// "" when the CUDA backend can run `model` on GPU `gpu` (as `--device auto`'s choice when
// `automatic`); otherwise why not. Quantized weights
// run there as matrices (matmul, embedding) only. The loaders give every vector (norm
// weight, bias) in f32; a hand-built model with a quantized one is refused here rather than
// midway through a run.
std::string cuda_obstacle(int gpu, Model& model, bool automatic) {
  std::string why = automatic ? cuda_auto_obstacle(gpu) : cuda_unavailable_reason(gpu);
  if (!why.empty()) return why;
  for_each_op_weight(model.weights, [&](Tensor& t) {
    if (why.empty() && t.data != nullptr && is_quantized(t.dtype) && t.rank != 2)
      why = fmt::format(
          "the model has a {} tensor of {} dimension(s), which the CUDA backend does not run "
          "(quantized weights run there as matrices only)",
          dtype_name(t.dtype), t.rank);
  });
  return why;
}

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
    const std::string why = cuda_obstacle(0, model, /*automatic=*/true);
    if (why.empty()) {
#ifdef TOKENMILL_HAS_CUDA
      choice.backend = make_cuda_backend(0);
#endif
    } else {
      choice.backend = make_cpu_backend();
      choice.note = "running on the CPU: " + why;
    }
  } else if (const std::optional<int> gpu = cuda_index(device)) {
    const std::string why = cuda_obstacle(*gpu, model, /*automatic=*/false);
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
