#include "model/model_config.h"

#include <cmath>
#include <iterator>

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
  return {static_cast<float>(1.0 / std::sqrt(scalar)), sliding_layer(layer) ? sliding_window : 0,
          static_cast<float>(attn_logit_softcapping)};
}

int64_t ModelConfig::attention_span() const {
  for (int64_t l = 0; l < num_hidden_layers; ++l)
    if (!sliding_layer(l)) return 0;
  return sliding_window;
}

bool ModelConfig::sliding_rope(int64_t layer) const { return sliding_rope_theta > 0 && sliding_layer(layer); }

float ModelConfig::rope_magnitude(int64_t layer) const {
  return sliding_rope(layer) ? 1.0f : static_cast<float>(rope_scaling.attention_factor);
}

void check_rotary(const ModelConfig& c, const std::string& source) {
  if (c.rotary_dim < 2 || c.rotary_dim % 2 != 0 || c.rotary_dim > c.head_dim)
    fail("{}: RoPE rotates {} elements of each head of {}; it needs an even count from 2 to the head's",
         source, c.rotary_dim, c.head_dim);
  const RopeScaling& s = c.rope_scaling;
  if (s.rope_type == "longrope" && std::ssize(s.short_factor) != c.rotary_dim / 2)
    fail("{}: LongRoPE has {} factors per list but the {} rotated elements of each head make {} pairs",
         source, s.short_factor.size(), c.rotary_dim, c.rotary_dim / 2);
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
  if (c.positions == PositionKind::Rotary) {
    // int(head_dim * partial_rotary_factor), as transformers truncates it.
    c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * partial_rotary_factor(f));
    check_rotary(c, source);
  }
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
