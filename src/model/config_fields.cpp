#include "model/config_fields.h"

#include <cmath>

namespace tokenmill {

MlpKind parse_activation(const std::string& name, const std::string& source) {
  if (name == "silu" || name == "swish") return MlpKind::SwiGlu;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") return MlpKind::GeluTanh;
  if (name == "gelu") return MlpKind::GeluErf;
  fail("{}: unsupported activation '{}' (supported: silu, gelu, gelu_new, gelu_pytorch_tanh)", source, name);
}

namespace {

// YaRN's fields, as transformers reads them (modeling_rope_utils._compute_yarn_parameters).
void parse_yarn(const FieldReader& rope, RopeScaling& s) {
  s.original_max_position_embeddings = rope.integer("original_max_position_embeddings", 1, kMaxPositions);
  s.beta_fast = rope.number_or("beta_fast", 32.0, 1e-6, 1e6);
  s.beta_slow = rope.number_or("beta_slow", 1.0, 1e-6, 1e6);
  s.truncate = rope.boolean_or("truncate", true);
  // mscale from the YaRN paper: 0.1 m ln(factor) + 1 (1 for factors up to 1).
  const auto mscale = [&](double m) { return s.factor <= 1.0 ? 1.0 : 0.1 * m * std::log(s.factor) + 1.0; };
  const double m = rope.number_or("mscale", 0.0, 0.0, 1e6),
               m_all = rope.number_or("mscale_all_dim", 0.0, 0.0, 1e6);
  s.attention_factor = rope.number_or(
      "attention_factor", m > 0 && m_all > 0 ? mscale(m) / mscale(m_all) : mscale(1.0), 1e-6, 1e6);
}

std::vector<float> factor_list(const FieldReader& rope, const char* key) {
  if (!rope.has(key)) fail("{}: missing required field '{}'", rope.source(), key);
  const nlohmann::json& list = rope.raw(key);
  if (!list.is_array() || list.empty() || list.size() > static_cast<size_t>(kMaxDimension))
    fail("{}: field '{}' must be a list of numbers", rope.source(), key);
  std::vector<float> out;
  for (const nlohmann::json& v : list) {
    if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
      fail("{}: field '{}' must hold finite numbers > 0", rope.source(), key);
    out.push_back(static_cast<float>(v.get<double>()));  // torch.tensor(..., dtype=float32)
  }
  return out;
}

// LongRoPE's fields, as transformers reads them (_compute_longrope_parameters): Phi-3's
// top-level original_max_position_embeddings wins over the one in rope_scaling; the
// attention factor by default sqrt(1 + ln(factor) / ln(original context)), factor by default
// max_position_embeddings over the original context.
void parse_longrope(const FieldReader& fields, const FieldReader& rope, int64_t max_positions,
                    RopeScaling& s) {
  s.rope_type = "longrope";  // Phi-3-128k's configs say "su"
  s.short_factor = factor_list(rope, "short_factor");
  s.long_factor = factor_list(rope, "long_factor");
  if (s.short_factor.size() != s.long_factor.size())
    fail("{}: short_factor has {} values and long_factor {}", rope.source(), s.short_factor.size(),
         s.long_factor.size());
  s.original_max_position_embeddings = fields.integer_or(
      "original_max_position_embeddings",
      rope.integer_or("original_max_position_embeddings", max_positions, 1, kMaxPositions), 1, kMaxPositions);
  const double original = static_cast<double>(s.original_max_position_embeddings);
  s.factor = rope.number_or("factor", static_cast<double>(max_positions) / original, 1e-6, 1e6);
  s.attention_factor = rope.number_or(
      "attention_factor",
      s.factor <= 1.0 || original <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(s.factor) / std::log(original)),
      1e-6, 1e6);
}

// rope_parameters (transformers >= 5) or rope_scaling (< 5); null when neither.
const char* rope_key(const FieldReader& fields) {
  return fields.has("rope_parameters") ? "rope_parameters"
         : fields.has("rope_scaling")  ? "rope_scaling"
                                       : nullptr;
}

}  // namespace

double partial_rotary_factor(const FieldReader& fields) {
  // Phi-4-mini's 4.x configs keep it at the top level, transformers 5 in rope_parameters.
  const double top = fields.number_or("partial_rotary_factor", 1.0, 1e-6, 1.0);
  const char* key = rope_key(fields);
  if (key == nullptr) return top;
  return FieldReader(fields.raw(key), fields.source() + ": " + key)
      .number_or("partial_rotary_factor", top, 1e-6, 1.0);
}

void parse_rope(const FieldReader& fields, ModelConfig& c) {
  c.rope_theta = fields.number_or("rope_theta", 10000.0, 1e-6, 1e12);
  const char* key = rope_key(fields);
  if (key == nullptr) return;
  const std::string where = fields.source() + ": " + key;
  FieldReader rope(fields.raw(key), where);
  c.rope_theta = rope.number_or("rope_theta", c.rope_theta, 1e-6, 1e12);
  RopeScaling& s = c.rope_scaling;
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
  if (s.rope_type == "yarn") {
    parse_yarn(rope, s);
    return;
  }
  if (s.rope_type == "longrope" || s.rope_type == "su") {
    if (c.max_position_embeddings < 1) fail("{}: LongRoPE needs max_position_embeddings", where);
    parse_longrope(fields, rope, c.max_position_embeddings, s);
    return;
  }
  fail("{}: rope type '{}' is not supported (supported: default, linear, llama3, yarn, longrope)", where,
       s.rope_type);
}

}  // namespace tokenmill
