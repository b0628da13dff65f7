// Reading an OpenAI request body's fields, as OpenAI does: a field that is absent and one that
// is null both mean "the default".
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tokenmill {

// The value of `key` in `object`, or nullptr when it is absent or null.
inline const nlohmann::json* field(const nlohmann::json& object, const std::string& key) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace tokenmill
