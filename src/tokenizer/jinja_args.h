// Binds call arguments to a Python-style signature, for filters, tests, methods and globals.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace tokenmill::jinja {

class BoundArgs {
 public:
  // Positional arguments fill `params` in order, keywords by name; the first `required`
  // parameters must be given. Extra or unknown arguments raise TypeError as Python does.
  BoundArgs(std::string_view function, const CallArgs& args, std::initializer_list<std::string_view> params,
            std::size_t required = 0);

  bool has(std::size_t i) const { return values_[i].has_value(); }
  const Value& get(std::size_t i) const { return *values_[i]; }
  Value get_or(std::size_t i, Value fallback) const { return has(i) ? *values_[i] : fallback; }
  // Python truthiness of an optional flag argument.
  bool flag(std::size_t i, bool fallback = false) const;

 private:
  std::vector<std::optional<Value>> values_;
};

// Checks the argument is a str / int (bool counts as int) and returns it.
const std::string& string_arg(std::string_view function, std::string_view param, const Value& v);
std::int64_t int_arg(std::string_view function, std::string_view param, const Value& v);

}  // namespace tokenmill::jinja
