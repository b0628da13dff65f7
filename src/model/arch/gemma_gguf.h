// What llama.cpp derives for a Gemma GGUF file ("gemma2", "gemma3") instead of storing it
// (llama-model.cpp), so that the GGUF loader derives the same and `convert` refuses a
// config those files could not express.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tokenmill {

struct GemmaGgufRules {
  int64_t sliding_pattern;    // every sliding_pattern-th layer is global, the others slide
  int64_t wide_scale_layers;  // the 27B's layer count: it scales scores by (hidden / heads)^-1/2
  double sliding_rope_theta;  // the sliding layers' RoPE base (0: the global layers')
};

// The rules of a GGUF architecture, nullopt when it is not a Gemma.
std::optional<GemmaGgufRules> gemma_gguf_rules(std::string_view gguf_arch);

// query_pre_attn_scalar as llama.cpp derives it: hidden / heads for the 27B, else head_dim.
inline int64_t gemma_gguf_query_scalar(const GemmaGgufRules& rules, int64_t layers, int64_t hidden,
                                       int64_t heads, int64_t head_dim) {
  return layers == rules.wide_scale_layers && heads > 0 ? hidden / heads : head_dim;
}

}  // namespace tokenmill
