// libFuzzer target for config.json parsing (model/model_config.h): every architecture's
// reader (model/arch/), seeded with the committed fixtures' configs.
//
// parse_model_config must accept a config or throw tokenmill::Error; any other exception, a
// crash, or a sanitizer report is a bug. What it accepts must be a model the forward can
// run: positive sizes, heads grouped over the kv heads, one sliding flag per layer (or none),
// every layer's attention scores finite, and RoPE over an even part of each head with one
// LongRoPE factor per rotated pair and a finite magnitude > 0.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json json = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return 0;
  tokenmill::ModelConfig c;
  try {
    c = tokenmill::parse_model_config(json, "fuzz input");
  } catch (const tokenmill::Error&) {
    return 0;
  }
  if (c.hidden_size < 1 || c.num_hidden_layers < 1 || c.head_dim < 1 || c.vocab_size < 1) __builtin_trap();
  if (c.num_key_value_heads < 1 || c.num_attention_heads % c.num_key_value_heads != 0) __builtin_trap();
  if (!c.sliding_layers.empty() && static_cast<int64_t>(c.sliding_layers.size()) != c.num_hidden_layers)
    __builtin_trap();
  if (c.context_length() < 1 || c.mlp_width() < 1) __builtin_trap();
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const tokenmill::AttentionScores s = c.attention_scores(l);
    if (!std::isfinite(s.scale) || !(s.scale > 0.0f) || s.window < 0 || !std::isfinite(s.softcap))
      __builtin_trap();
    const float magnitude = c.rope_magnitude(l);
    if (!std::isfinite(magnitude) || !(magnitude > 0.0f)) __builtin_trap();
  }
  if (c.positions == tokenmill::PositionKind::Rotary) {
    if (c.rotary_dim < 2 || c.rotary_dim % 2 != 0 || c.rotary_dim > c.head_dim) __builtin_trap();
    const tokenmill::RopeScaling& r = c.rope_scaling;
    if (r.rope_type == "longrope" &&
        (std::ssize(r.short_factor) != c.rotary_dim / 2 || std::ssize(r.long_factor) != c.rotary_dim / 2))
      __builtin_trap();
  }
  return 0;
}
