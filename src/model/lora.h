// LoRA (low-rank adaptation) of a model's linear layers, with Hugging Face PEFT's LoraLayer
// semantics (lora_dropout 0, bias "none"), so an adapter trained here is a PEFT adapter:
//
//   y = x W^T (+ b) + s (x A^T) B^T,   s = alpha / rank,
//
// W [out, in] the frozen base weight, A [rank, in] and B [out, rank] the trainable adapter
// (PEFT's lora_A.weight and lora_B.weight). Targets name the engine's linear layers: the
// attention projections q, k, v, o and the MLP's gate, up, down (GPT-2: c_attn's q, k, v
// parts, attn.c_proj = o, c_fc = up, mlp.c_proj = down; it has no gate).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace tokenmill {

enum class LoraTarget : uint8_t { Q, K, V, O, Gate, Up, Down };
inline constexpr size_t kLoraTargetCount = 7;
inline constexpr std::array<LoraTarget, kLoraTargetCount> kLoraTargets = {
    LoraTarget::Q,    LoraTarget::K,  LoraTarget::V,   LoraTarget::O,
    LoraTarget::Gate, LoraTarget::Up, LoraTarget::Down};

std::string_view lora_target_name(LoraTarget target);  // "q", "k", ..., "down"

struct LoraConfig {
  int64_t rank = 0;  // 0: no adapter (full fine-tuning)
  double alpha = 0.0;
  std::vector<LoraTarget> targets;  // in kLoraTargets order, no repeats

  bool enabled() const { return rank > 0; }
  bool targets_layer(LoraTarget target) const;
  float scale() const { return static_cast<float>(alpha / static_cast<double>(rank)); }
  std::string targets_string() const;  // "q,k,v,o"
};

// Parses "q,k,v,o,gate,up,down" (any subset, any order). Throws Error on an empty list, an
// unknown name or a repeat.
std::vector<LoraTarget> parse_lora_targets(std::string_view list);

// Throws Error unless rank >= 1, alpha > 0, targets is not empty and every target exists in
// `config`'s architecture (GPT-2's GELU MLP has no gate).
void check_lora_config(const ModelConfig& config, const LoraConfig& lora);

// {out, in} of a target's base weight in `config`'s architecture.
std::array<int64_t, 2> lora_target_shape(const ModelConfig& config, LoraTarget target);

// One adapted linear layer: a [rank, in], b [out, rank], f32; both null when not targeted.
struct LoraLinear {
  Tensor a, b;
};
struct LoraWeights {
  float scale = 0.0f;  // alpha / rank
  std::vector<std::array<LoraLinear, kLoraTargetCount>> layers;

  const LoraLinear& at(int64_t layer, LoraTarget target) const {
    return layers[static_cast<size_t>(layer)][static_cast<size_t>(target)];
  }
};

// Error unless `adapter` can serve a model of `config` unmerged (PagedTransformer::Slice):
// one entry per layer, and each module's scale folded into its B (scale 1, as
// read_peft_adapter makes it).
void check_unmerged_adapter(const ModelConfig& config, const LoraWeights& adapter);

// The model with the adapter merged: every targeted weight becomes W + s B A (f32, computed
// in double, owned by the result); everything else views `base`.
ModelWeights merge_lora(const ModelConfig& config, const ModelWeights& base, const LoraWeights& lora);

}  // namespace tokenmill
