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

void check_full_rotary(double partial_rotary_factor, const std::string& where) {
  if (partial_rotary_factor != 1.0)
    fail("{}: partial_rotary_factor {} (rotary embeddings over part of each head) is not supported", where,
         partial_rotary_factor);
}

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

}  // namespace

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
  if (s.rope_type == "yarn") {
    parse_yarn(rope, s);
    return;
  }
  fail("{}: rope type '{}' is not supported (supported: default, linear, llama3, yarn)", where, s.rope_type);
}

}  // namespace tokenmill
