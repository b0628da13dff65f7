#include "model/model_config.h"

#include <cmath>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "model/arch/architecture.h"
#include "model/config_fields.h"

namespace tokenmill {

int64_t ModelConfig::context_length() const { return max_position_embeddings; }

AttentionScores ModelConfig::attention_scores(int64_t layer) const {
  const double scalar = query_pre_attn_scalar > 0 ? query_pre_attn_scalar : static_cast<double>(head_dim);
  // YaRN's attention factor multiplies both q's and k's rotated elements: q . k by its square.
  const double factor = rope_scaling.attention_factor;
  return {static_cast<float>(factor * factor / std::sqrt(scalar)), sliding_layer(layer) ? sliding_window : 0,
          static_cast<float>(attn_logit_softcapping)};
}

ModelConfig parse_model_config(const nlohmann::json& json, const std::string& source) {
  FieldReader f(json, source);
  ModelConfig c;
  if (!f.has("architectures") || !json.at("architectures").is_array() || json.at("architectures").empty() ||
      !json.at("architectures")[0].is_string())
    fail("{}: missing 'architectures' (a list naming the model class)", source);
  c.architecture = json.at("architectures")[0].get<std::string>();
  const Architecture* architecture = find_architecture(c.architecture);
  if (architecture == nullptr)
    fail("{}: unsupported architecture '{}' (supported: {})", source, c.architecture,
         supported_architectures());
  c.model_type = std::string(architecture->model_type);
  architecture->read_config(f, c);

  if (c.head_dim == 0) {
    if (c.hidden_size % c.num_attention_heads != 0)
      fail("{}: hidden size {} is not divisible by the {} attention heads", source, c.hidden_size,
           c.num_attention_heads);
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail("{}: {} attention heads are not divisible by {} key/value heads", source, c.num_attention_heads,
         c.num_key_value_heads);
  if (c.positions == PositionKind::Rotary && c.head_dim % 2 != 0)
    fail("{}: rotary embeddings need an even head_dim, got {}", source, c.head_dim);
  if (c.rope_scaling.rope_type == "llama3" && c.rope_scaling.factor < 1.0)
    fail("{}: llama3 rope_scaling factor must be >= 1", source);
  if (c.mixture_of_experts()) {
    if (c.experts_per_token < 1 || c.experts_per_token > c.num_experts)
      fail("{}: {} experts per token is not within the {} experts", source, c.experts_per_token,
           c.num_experts);
    if (c.expert_intermediate_size < 1) fail("{}: the experts' intermediate size must be >= 1", source);
    if (c.mlp != MlpKind::SwiGlu || c.post_norms)
      fail("{}: experts are SwiGLU MLPs after a pre-norm", source);
  }

  const auto bos = f.integer_list("bos_token_id");
  if (!bos.empty()) c.bos_token_id = bos.front();
  c.eos_token_ids = f.integer_list("eos_token_id");
  return c;
}

void apply_generation_config(const nlohmann::json& json, const std::string& source, ModelConfig& c) {
  FieldReader f(json, source);
  const auto eos = f.integer_list("eos_token_id");
  if (!eos.empty()) c.eos_token_ids = eos;
  const auto bos = f.integer_list("bos_token_id");
  if (!bos.empty()) c.bos_token_id = bos.front();
  GenerationDefaults& g = c.generation;
  if (f.has("do_sample")) g.do_sample = f.boolean_or("do_sample", false);
  g.temperature = f.optional_number("temperature", 0.0, 1e6);
  if (f.has("top_k")) g.top_k = f.integer("top_k", 0, INT32_MAX);
  g.top_p = f.optional_number("top_p", 0.0, 1.0);
  g.min_p = f.optional_number("min_p", 0.0, 1.0);
  g.repetition_penalty = f.optional_number("repetition_penalty", 1e-6, 1e6);
}

ModelConfig load_model_config(const std::filesystem::path& dir) {
  const auto config_path = dir / "config.json";
  if (!std::filesystem::is_directory(dir)) fail("model directory '{}' does not exist", dir.string());
  if (!std::filesystem::exists(config_path))
    fail("{}: not found (a model directory needs config.json)", config_path.string());
  ModelConfig c = parse_model_config(read_json_file(config_path), config_path.string());
  const auto generation_path = dir / "generation_config.json";
  if (std::filesystem::exists(generation_path))
    apply_generation_config(read_json_file(generation_path), generation_path.string(), c);
  // Tiny models made from a larger one's config often keep its eos id (e.g. GPT-2's 50256):
  // that id can never be generated, so it ends nothing and is dropped, with a warning.
  std::erase_if(c.eos_token_ids, [&](int32_t id) {
    if (id >= 0 && id < c.vocab_size) return false;
    spdlog::warn("{}: ignoring eos_token_id {}: it is outside the vocabulary of {} tokens", dir.string(), id,
                 c.vocab_size);
    return true;
  });
  return c;
}

}  // namespace tokenmill
