// Reading a config.json: typed, validated access to its fields, and the readers several
// families share (activation, RoPE). Errors name the file and the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/model_config.h"

namespace tokenmill {

inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxDimension = int64_t{1} << 20;
inline constexpr int64_t kMaxVocab = int64_t{1} << 24;
inline constexpr int64_t kMaxPositions = int64_t{1} << 24;
inline constexpr int64_t kMaxExperts = 4096;

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
  const nlohmann::json& object() const { return object_; }
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

// The MLP of a `hidden_act` / `activation_function` name.
MlpKind parse_activation(const std::string& name, const std::string& source);

// rope_theta and rope_scaling (transformers < 5) or rope_parameters (transformers >= 5,
// which also moves rope_theta inside it): default, linear, llama3, yarn and longrope
// scaling. Reads max_position_embeddings from `config` (LongRoPE's default factor).
void parse_rope(const FieldReader& fields, ModelConfig& config);

// The share of each head RoPE rotates: partial_rotary_factor, in rope_parameters or at the
// top level (Phi-4-mini's transformers 4 configs); 1 when absent.
double partial_rotary_factor(const FieldReader& fields);

}  // namespace tokenmill
