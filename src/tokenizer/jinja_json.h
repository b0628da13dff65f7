// JSON in and out of template values: json.dumps as transformers' `tojson` filter calls it,
// and the conversion of the caller's nlohmann JSON (messages, tools, kwargs) into Values.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/jinja_value.h"

namespace tokenmill::jinja {

// The json.dumps arguments transformers' tojson filter exposes.
struct JsonDumpOptions {
  std::optional<std::string> indent;  // unset: everything on one line
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::string item_separator = ", ";  // json.dumps uses "," when an indent is given
  std::string key_separator = ": ";
};

std::string dump_json(const Value& v, const JsonDumpOptions& options, Budget& budget);

// Objects keep the key order of the JSON type (sorted for nlohmann::json).
Value value_from_json(const nlohmann::json& json, Heap& heap);
Value value_from_json(const nlohmann::ordered_json& json, Heap& heap);

}  // namespace tokenmill::jinja
