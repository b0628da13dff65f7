#include "model/model_info.h"

#include <fmt/format.h>

#include "core/byte_units.h"

namespace tokenmill {

ModelInfo describe(const Model& model) {
  const ModelConfig& c = model.config;
  ModelInfo info;
  info.path = model.path.string();
  info.architecture = c.architecture;
  info.model_type = c.model_type;
  info.parameters = model.parameter_count();
  info.weight_bytes_by_dtype = model.weight_bytes_by_type();
  for (const auto& [dtype, bytes] : info.weight_bytes_by_dtype) info.weight_bytes += bytes;
  info.context_length = c.context_length();
  info.layers = c.num_hidden_layers;
  info.hidden_size = c.hidden_size;
  info.intermediate_size = c.mlp_width();
  info.experts = c.num_experts;
  info.experts_per_token = c.experts_per_token;
  info.heads = c.num_attention_heads;
  info.kv_heads = c.num_key_value_heads;
  info.head_dim = c.head_dim;
  info.vocab_size = c.vocab_size;
  info.tied_embeddings = c.tie_word_embeddings;
  info.sliding_window = c.sliding_window;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) info.sliding_layers += c.sliding_layer(l) ? 1 : 0;
  info.attn_logit_softcapping = c.attn_logit_softcapping;
  info.final_logit_softcapping = c.final_logit_softcapping;
  info.norm = c.norm == NormKind::LayerNorm ? "layernorm" : "rmsnorm";
  info.mlp = c.mlp == MlpKind::SwiGlu     ? "swiglu"
             : c.mlp == MlpKind::GeGlu    ? "geglu"
             : c.mlp == MlpKind::GeluTanh ? "gelu_tanh"
                                          : "gelu_erf";
  info.positions = c.positions == PositionKind::Learned ? "learned" : "rope";
  info.rope_scaling = c.positions == PositionKind::Rotary ? c.rope_scaling.rope_type : "none";
  info.kv_cache_dtype = std::string(dtype_name(model.default_kv_dtype()));
  info.kv_cache_bytes_per_token =
      static_cast<uint64_t>(c.kv_floats_per_token()) * dtype_size(model.default_kv_dtype());
  return info;
}

nlohmann::json to_json(const ModelInfo& i) {
  return {
      {"path", i.path},
      {"architecture", i.architecture},
      {"model_type", i.model_type},
      {"parameters", i.parameters},
      {"weight_bytes", i.weight_bytes},
      {"weight_bytes_by_dtype", i.weight_bytes_by_dtype},
      {"context_length", i.context_length},
      {"num_hidden_layers", i.layers},
      {"hidden_size", i.hidden_size},
      {"intermediate_size", i.intermediate_size},
      {"experts", i.experts},
      {"experts_per_token", i.experts_per_token},
      {"num_attention_heads", i.heads},
      {"num_key_value_heads", i.kv_heads},
      {"head_dim", i.head_dim},
      {"vocab_size", i.vocab_size},
      {"tie_word_embeddings", i.tied_embeddings},
      {"sliding_window", i.sliding_window},
      {"sliding_layers", i.sliding_layers},
      {"attn_logit_softcapping", i.attn_logit_softcapping},
      {"final_logit_softcapping", i.final_logit_softcapping},
      {"norm", i.norm},
      {"mlp", i.mlp},
      {"positions", i.positions},
      {"rope_scaling", i.rope_scaling},
      {"kv_cache_dtype", i.kv_cache_dtype},
      {"kv_cache_bytes_per_token", i.kv_cache_bytes_per_token},
      {"kv_cache_bytes_full_context", i.kv_cache_bytes_per_token * static_cast<uint64_t>(i.context_length)}};
}

std::string to_text(const ModelInfo& i) {
  std::string dtypes;
  for (const auto& [dtype, bytes] : i.weight_bytes_by_dtype)
    dtypes += fmt::format("{}{} {}", dtypes.empty() ? "" : ", ", dtype, human_bytes(bytes));
  std::string out;
  out += fmt::format("model          {}\n", i.path);
  out += fmt::format("architecture   {} ({})\n", i.architecture, i.model_type);
  out += fmt::format("parameters     {} ({:.2f} M)\n", i.parameters, static_cast<double>(i.parameters) / 1e6);
  out += fmt::format("weights        {} ({})\n", human_bytes(i.weight_bytes), dtypes);
  out += fmt::format("layers         {} x hidden {}, mlp {} ({})\n", i.layers, i.hidden_size,
                     i.intermediate_size, i.mlp);
  if (i.experts > 0)
    out += fmt::format("experts        {} per layer, {} per token (mlp above: one expert's)\n", i.experts,
                       i.experts_per_token);
  out += fmt::format("attention      {} heads, {} kv heads, head_dim {}\n", i.heads, i.kv_heads, i.head_dim);
  if (i.sliding_window > 0)
    out += fmt::format("sliding window {} positions, in {} of {} layers\n", i.sliding_window,
                       i.sliding_layers, i.layers);
  if (i.attn_logit_softcapping > 0 || i.final_logit_softcapping > 0)
    out += fmt::format("soft caps      scores {}, logits {} (0: none)\n", i.attn_logit_softcapping,
                       i.final_logit_softcapping);
  out += fmt::format("positions      {} (scaling: {}), norm {}\n", i.positions, i.rope_scaling, i.norm);
  out +=
      fmt::format("vocabulary     {} (embeddings {})\n", i.vocab_size, i.tied_embeddings ? "tied" : "untied");
  out += fmt::format("context        {} tokens\n", i.context_length);
  out += fmt::format(
      "KV cache       {} per token, {} for the full context ({})\n", human_bytes(i.kv_cache_bytes_per_token),
      human_bytes(i.kv_cache_bytes_per_token * static_cast<uint64_t>(i.context_length)), i.kv_cache_dtype);
  return out;
}

}  // namespace tokenmill
