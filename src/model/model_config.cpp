#include "model/model_config.h"

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"

namespace tokenmill {

namespace {

constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxDimension = int64_t{1} << 20;
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxPositions = int64_t{1} << 24;

// Typed, validated access to the fields of one JSON object; errors name source and field.
class FieldReader {
 public:
  FieldReader(const nlohmann::json& object, std::string source)
      : object_(object), source_(std::move(source)) {
    if (!object_.is_object()) fail("{}: expected a JSON object", source_);
  }

  bool has(const char* key) const { return object_.contains(key) && !object_.at(key).is_null(); }

  int64_t integer(const char* key, int64_t lo, int64_t hi) const {
    if (!has(key)) fail("{}: missing required field '{}'", source_, key);
    return checked_integer(key, object_.at(key), lo, hi);
  }
  int64_t integer_or(const char* key, int64_t fallback, int64_t lo, int64_t hi) const {
    return has(key) ? integer(key, lo, hi) : fallback;
  }
  double number_or(const char* key, double fallback, double lo, double hi) const {
    if (!has(key)) return fallback;
    const auto& v = object_.at(key);
    if (!v.is_number()) fail("{}: field '{}' must be a number", source_, key);
    const double d = v.get<double>();
    if (!(d >= lo && d <= hi)) fail("{}: field '{}' = {} is outside [{}, {}]", source_, key, d, lo, hi);
    return d;
  }
  std::optional<double> optional_number(const char* key, double lo, double hi) const {
    if (!has(key)) return std::nullopt;
    return number_or(key, 0.0, lo, hi);
  }
  bool boolean_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!object_.at(key).is_boolean()) fail("{}: field '{}' must be true or false", source_, key);
    return object_.at(key).get<bool>();
  }
  std::string string_or(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!object_.at(key).is_string()) fail("{}: field '{}' must be a string", source_, key);
    return object_.at(key).get<std::string>();
  }
  // An int or a list of ints (as eos_token_id may be).
  std::vector<int32_t> integer_list(const char* key) const {
    std::vector<int32_t> out;
    if (!has(key)) return out;
    const auto& v = object_.at(key);
    if (v.is_array()) {
      for (const auto& item : v)
        out.push_back(static_cast<int32_t>(checked_integer(key, item, 0, INT32_MAX)));
    } else {
      out.push_back(static_cast<int32_t>(checked_integer(key, v, 0, INT32_MAX)));
    }
    return out;
  }
  const nlohmann::json& raw(const char* key) const { return object_.at(key); }
  const std::string& source() const { return source_; }

 private:
  int64_t checked_integer(const char* key, const nlohmann::json& v, int64_t lo, int64_t hi) const {
    if (!v.is_number_integer()) fail("{}: field '{}' must be an integer", source_, key);
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
      fail("{}: field '{}' = {} is outside [{}, {}]", source_, key, v.get<uint64_t>(), lo, hi);
    const int64_t i = v.get<int64_t>();
    if (i < lo || i > hi) fail("{}: field '{}' = {} is outside [{}, {}]", source_, key, i, lo, hi);
    return i;
  }

  const nlohmann::json& object_;
  std::string source_;
};

MlpKind parse_activation(const std::string& name, const std::string& source) {
  if (name == "silu" || name == "swish") return MlpKind::SwiGlu;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") return MlpKind::GeluTanh;
  if (name == "gelu") return MlpKind::GeluErf;
  fail("{}: unsupported activation '{}' (supported: silu, gelu, gelu_new, gelu_pytorch_tanh)", source, name);
}

// rope_scaling (transformers < 5) or rope_parameters (transformers >= 5, which also moves
// rope_theta inside it).
void check_full_rotary(double partial_rotary_factor, const std::string& where) {
  if (partial_rotary_factor != 1.0)
    fail("{}: partial_rotary_factor {} (rotary embeddings over part of each head) is not supported", where,
         partial_rotary_factor);
}

void parse_rope(const FieldReader& fields, ModelConfig& c) {
  c.rope_theta = fields.number_or("rope_theta", 10000.0, 1e-6, 1e12);
  // Phi-4-mini's 4.x configs keep it at the top level, transformers 5 in rope_parameters.
  const double partial = fields.number_or("partial_rotary_factor", 1.0, 0.0, 1.0);
  check_full_rotary(partial, fields.source());
  const char* key = fields.has("rope_parameters") ? "rope_parameters"
                    : fields.has("rope_scaling")  ? "rope_scaling"
                                                  : nullptr;
  if (key == nullptr) return;
  const std::string where = fields.source() + ": " + key;
  FieldReader rope(fields.raw(key), where);
  c.rope_theta = rope.number_or("rope_theta", c.rope_theta, 1e-6, 1e12);
  RopeScaling& s = c.rope_scaling;
  check_full_rotary(rope.number_or("partial_rotary_factor", partial, 0.0, 1.0), where);
  s.rope_type = rope.string_or("rope_type", rope.string_or("type", "default"));
  if (s.rope_type == "default") return;
  s.factor = rope.number_or("factor", 1.0, 1e-6, 1e6);
  if (s.rope_type == "linear") return;
  if (s.rope_type == "llama3") {
    s.low_freq_factor = rope.number_or("low_freq_factor", 1.0, 1e-6, 1e6);
    s.high_freq_factor = rope.number_or("high_freq_factor", 4.0, 1e-6, 1e6);
    if (s.high_freq_factor <= s.low_freq_factor)
      fail("{}: high_freq_factor must be greater than low_freq_factor", where);
    s.original_max_position_embeddings = rope.integer("original_max_position_embeddings", 1, kMaxPositions);
    return;
  }
  fail("{}: rope type '{}' is not supported (supported: default, linear, llama3)", where, s.rope_type);
}

void parse_gpt2(const FieldReader& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size", 1, kMaxVocab);
  c.hidden_size = f.integer("n_embd", 1, kMaxDimension);
  c.num_hidden_layers = f.integer("n_layer", 1, kMaxLayers);
  c.num_attention_heads = f.integer("n_head", 1, kMaxDimension);
  c.num_key_value_heads = c.num_attention_heads;
  c.intermediate_size = f.integer_or("n_inner", 4 * c.hidden_size, 1, kMaxDimension);
  c.max_position_embeddings = f.integer("n_positions", 1, kMaxPositions);
  c.norm = NormKind::LayerNorm;
  c.norm_eps = f.number_or("layer_norm_epsilon", 1e-5, 0.0, 1.0);
  c.mlp = parse_activation(f.string_or("activation_function", "gelu_new"), f.source());
  if (c.mlp == MlpKind::SwiGlu) fail("{}: GPT-2 with a gated activation is not supported", f.source());
  c.positions = PositionKind::Learned;
  c.attention_qkv_bias = c.attention_out_bias = c.mlp_bias = true;
  c.tie_word_embeddings = f.boolean_or("tie_word_embeddings", true);
  if (f.boolean_or("scale_attn_by_inverse_layer_idx", false) ||
      f.boolean_or("reorder_and_upcast_attn", false))
    fail("{}: scale_attn_by_inverse_layer_idx / reorder_and_upcast_attn are not supported", f.source());
  if (!f.boolean_or("scale_attn_weights", true))
    fail("{}: scale_attn_weights=false is not supported", f.source());
}

void parse_llama_family(const FieldReader& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size", 1, kMaxVocab);
  c.hidden_size = f.integer("hidden_size", 1, kMaxDimension);
  c.intermediate_size = f.integer("intermediate_size", 1, kMaxDimension);
  c.num_hidden_layers = f.integer("num_hidden_layers", 1, kMaxLayers);
  c.num_attention_heads = f.integer("num_attention_heads", 1, kMaxDimension);
  c.num_key_value_heads = f.integer_or("num_key_value_heads", c.num_attention_heads, 1, kMaxDimension);
  if (f.has("head_dim")) c.head_dim = f.integer("head_dim", 1, kMaxDimension);
  c.max_position_embeddings = f.integer("max_position_embeddings", 1, kMaxPositions);
  c.norm = NormKind::RmsNorm;
  c.norm_eps = f.number_or("rms_norm_eps", 1e-6, 0.0, 1.0);
  c.mlp = parse_activation(f.string_or("hidden_act", "silu"), f.source());
  if (c.mlp != MlpKind::SwiGlu) fail("{}: hidden_act must be silu for {}", f.source(), c.architecture);
  c.positions = PositionKind::Rotary;
  parse_rope(f, c);
  if (c.model_type == "qwen2") {
    c.attention_qkv_bias = true;  // Qwen2 always has q/k/v biases and no o bias
    if (f.boolean_or("use_sliding_window", false))
      fail("{}: use_sliding_window=true is not supported", f.source());
  } else {
    c.attention_qkv_bias = c.attention_out_bias = f.boolean_or("attention_bias", false);
    c.mlp_bias = f.boolean_or("mlp_bias", false);
  }
  if (c.model_type == "olmo2") {
    c.qk_norm = QkNorm::Whole;
    c.post_norms = true;
  }
  if (c.model_type == "qwen3") {
    c.qk_norm = QkNorm::PerHead;
    if (f.boolean_or("use_sliding_window", false))
      fail("{}: use_sliding_window=true is not supported", f.source());
  }
  if (c.model_type == "mistral" || c.model_type == "phi3")
    c.sliding_window = f.integer_or("sliding_window", 0, 0, kMaxPositions);
  c.tie_word_embeddings = f.boolean_or("tie_word_embeddings", false);
}

}  // namespace

int64_t ModelConfig::context_length() const {
  return sliding_window > 0 && sliding_window < max_position_embeddings ? sliding_window
                                                                        : max_position_embeddings;
}

ModelConfig parse_model_config(const nlohmann::json& json, const std::string& source) {
  FieldReader f(json, source);
  ModelConfig c;
  if (!f.has("architectures") || !json.at("architectures").is_array() || json.at("architectures").empty() ||
      !json.at("architectures")[0].is_string())
    fail("{}: missing 'architectures' (a list naming the model class)", source);
  c.architecture = json.at("architectures")[0].get<std::string>();
  if (c.architecture == "GPT2LMHeadModel") {
    c.model_type = "gpt2";
    parse_gpt2(f, c);
  } else if (c.architecture == "LlamaForCausalLM" || c.architecture == "MistralForCausalLM" ||
             c.architecture == "Qwen2ForCausalLM" || c.architecture == "Qwen3ForCausalLM" ||
             c.architecture == "Phi3ForCausalLM" || c.architecture == "Olmo2ForCausalLM") {
    c.model_type = c.architecture == "LlamaForCausalLM"     ? "llama"
                   : c.architecture == "MistralForCausalLM" ? "mistral"
                   : c.architecture == "Qwen2ForCausalLM"   ? "qwen2"
                   : c.architecture == "Qwen3ForCausalLM"   ? "qwen3"
                   : c.architecture == "Phi3ForCausalLM"    ? "phi3"
                                                            : "olmo2";
    parse_llama_family(f, c);
  } else {
    fail(
        "{}: unsupported architecture '{}' (supported: GPT2LMHeadModel, LlamaForCausalLM, "
        "MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, Olmo2ForCausalLM)",
        source, c.architecture);
  }

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
