#include "model/lora.h"

#include <algorithm>

#include "core/dtype.h"
#include "core/error.h"

namespace tokenmill {

namespace {

constexpr std::array<std::string_view, kLoraTargetCount> kNames = {"q", "k", "v", "o", "gate", "up", "down"};

// The LayerWeights member (const or not) holding a target's weight.
template <class Layer>
auto& target_weight(Layer& layer, LoraTarget target) {
  switch (target) {
    case LoraTarget::Q: return layer.q;
    case LoraTarget::K: return layer.k;
    case LoraTarget::V: return layer.v;
    case LoraTarget::O: return layer.o;
    case LoraTarget::Gate: return layer.gate;
    case LoraTarget::Up: return layer.up;
    case LoraTarget::Down: break;
  }
  return layer.down;
}

}  // namespace

std::string_view lora_target_name(LoraTarget target) { return kNames[static_cast<size_t>(target)]; }

bool LoraConfig::targets_layer(LoraTarget target) const {
  return std::find(targets.begin(), targets.end(), target) != targets.end();
}

std::string LoraConfig::targets_string() const {
  std::string out;
  for (const LoraTarget t : targets) {
    if (!out.empty()) out += ',';
    out += lora_target_name(t);
  }
  return out;
}

std::vector<LoraTarget> parse_lora_targets(std::string_view list) {
  std::array<bool, kLoraTargetCount> chosen{};
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string_view name = list.substr(start, comma - start);
    const auto* found = std::find(kNames.begin(), kNames.end(), name);
    if (found == kNames.end())
      fail("--lora-targets: unknown target '{}' in '{}'; the targets are q,k,v,o,gate,up,down", name, list);
    const auto index = static_cast<size_t>(found - kNames.begin());
    if (chosen[index]) fail("--lora-targets: '{}' is given twice in '{}'", name, list);
    chosen[index] = true;
    start = comma + 1;
  }
  std::vector<LoraTarget> targets;
  for (const LoraTarget t : kLoraTargets)
    if (chosen[static_cast<size_t>(t)]) targets.push_back(t);
  return targets;
}

void check_lora_config(const ModelConfig& config, const LoraConfig& lora) {
  if (lora.rank < 1) fail("--lora-rank must be >= 1, got {}", lora.rank);
  if (!(lora.alpha > 0.0)) fail("--lora-alpha must be > 0, got {}", lora.alpha);
  if (lora.targets.empty()) fail("--lora-targets: give at least one of q,k,v,o,gate,up,down");
  if (config.mixture_of_experts())
    for (const LoraTarget t : {LoraTarget::Gate, LoraTarget::Up, LoraTarget::Down})
      if (lora.targets_layer(t))
        fail(
            "--lora-targets: {} is a mixture of experts, whose experts are not adapted yet; adapt its "
            "attention (q,k,v,o)",
            config.architecture);
  if (lora.targets_layer(LoraTarget::Gate) && !gated_mlp(config.mlp))
    fail(
        "--lora-targets: this {} model has no gate projection (its MLP is GELU, not SwiGLU); adapt "
        "q,k,v,o,up,down",
        config.model_type);
}

std::array<int64_t, 2> lora_target_shape(const ModelConfig& c, LoraTarget target) {
  const int64_t q_width = c.num_attention_heads * c.head_dim, kv_width = c.num_key_value_heads * c.head_dim;
  switch (target) {
    case LoraTarget::Q: return {q_width, c.hidden_size};
    case LoraTarget::K:
    case LoraTarget::V: return {kv_width, c.hidden_size};
    case LoraTarget::O: return {c.hidden_size, q_width};
    case LoraTarget::Gate:
    case LoraTarget::Up: return {c.intermediate_size, c.hidden_size};
    case LoraTarget::Down: break;
  }
  return {c.hidden_size, c.intermediate_size};
}

void check_unmerged_adapter(const ModelConfig& config, const LoraWeights& adapter) {
  if (static_cast<int64_t>(adapter.layers.size()) != config.num_hidden_layers || adapter.scale != 1.0f)
    fail(
        "a LoRA adapter of {} layers (scale {}) cannot serve this {}-layer model unmerged (it needs its "
        "scale folded in, as read_peft_adapter does)",
        adapter.layers.size(), adapter.scale, config.num_hidden_layers);
}

ModelWeights merge_lora(const ModelConfig& config, const ModelWeights& base, const LoraWeights& lora) {
  ModelWeights merged = view_weights(base);
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    for (const LoraTarget t : kLoraTargets) {
      const LoraLinear& ad = lora.at(l, t);
      if (ad.a.data == nullptr) continue;
      const Tensor& w = target_weight(base.layers[static_cast<size_t>(l)], t);
      const int64_t out = ad.b.dim(0), in = ad.a.dim(1), rank = ad.a.dim(0);
      Tensor sum = merged.owned.allocate(DType::F32, {out, in});
      const float* a = ad.a.as<const float>();
      const float* b = ad.b.as<const float>();
      float* y = sum.as<float>();
      for (int64_t o = 0; o < out; ++o) {
        for (int64_t i = 0; i < in; ++i) {
          double delta = 0.0;
          for (int64_t r = 0; r < rank; ++r) delta += static_cast<double>(b[o * rank + r]) * a[r * in + i];
          y[o * in + i] = static_cast<float>(load_as_f32(w.data, w.dtype, static_cast<size_t>(o * in + i)) +
                                             static_cast<double>(lora.scale) * delta);
        }
      }
      target_weight(merged.layers[static_cast<size_t>(l)], t) = sum;
    }
  }
  return merged;
}

}  // namespace tokenmill
