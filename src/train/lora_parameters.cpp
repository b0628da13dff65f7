#include "train/lora_parameters.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

namespace tokenmill {

namespace {

// The adapter's parameters of `config`, in the order the class comment gives.
std::vector<Parameter> adapter_parameters(const ModelConfig& config, const LoraConfig& lora) {
  check_lora_config(config, lora);
  std::vector<Parameter> list;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l)
    for (const LoraTarget t : lora.targets) {
      const auto [out, in] = lora_target_shape(config, t);
      const std::string name = "layers." + std::to_string(l) + "." + std::string(lora_target_name(t));
      list.push_back({name + ".lora_A", {lora.rank, in}, true, 0, 0});
      list.push_back({name + ".lora_B", {out, lora.rank}, true, 0, 0});
    }
  return list;
}

}  // namespace

LoraParameters::LoraParameters(const ModelConfig& config, const LoraConfig& lora, Backend* backend,
                               MomentShard shard)
    : ParameterBuffers(adapter_parameters(config, lora), backend, shard), lora_(lora) {
  for (LoraWeights* views : {&weights_, &grads_}) {
    views->scale = lora.scale();
    views->layers.resize(static_cast<size_t>(config.num_hidden_layers));
  }
  size_t index = 0;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l)
    for (const LoraTarget t : lora.targets) {
      const Parameter& a = parameters()[index++];
      const Parameter& b = parameters()[index++];
      const auto slot = static_cast<size_t>(t);
      weights_.layers[static_cast<size_t>(l)][slot] = {value_view(a), value_view(b)};
      grads_.layers[static_cast<size_t>(l)][slot] = {gradient_view(a), gradient_view(b)};
    }
}

void LoraParameters::init(uint64_t seed) {
  std::mt19937_64 rng(seed);
  fill_values([&](std::span<float> values) {
    for (const Parameter& p : parameters()) {
      float* x = values.data() + p.offset;
      if (!p.name.ends_with(".lora_A")) {
        std::fill(x, x + p.numel, 0.0f);
        continue;
      }
      const double bound = 1.0 / std::sqrt(static_cast<double>(p.shape[1]));
      for (int64_t i = 0; i < p.numel; ++i) {
        // Uniform in [-bound, bound) from the top 53 bits (portable, unlike std::uniform_real_distribution).
        const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
        x[i] = static_cast<float>((2.0 * u - 1.0) * bound);
      }
    }
  });
}

}  // namespace tokenmill
