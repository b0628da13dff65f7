#include "tokenizer/jinja_args.h"

#include <fmt/format.h>

namespace tokenmill::jinja {

BoundArgs::BoundArgs(std::string_view function, const CallArgs& args,
                     std::initializer_list<std::string_view> params, std::size_t required)
    : values_(params.size()) {
  if (args.positional.size() > params.size()) {
    eval_fail(fmt::format("{}() takes at most {} argument{} ({} given)", function, params.size(),
                          params.size() == 1 ? "" : "s", args.positional.size()));
  }
  for (std::size_t i = 0; i < args.positional.size(); ++i) values_[i] = args.positional[i];
  for (const auto& [key, value] : args.keywords) {
    std::size_t index = 0;
    for (std::string_view p : params) {
      if (p == key) break;
      ++index;
    }
    if (index == params.size())
      eval_fail(fmt::format("{}() got an unexpected keyword argument '{}'", function, key));
    if (values_[index]) eval_fail(fmt::format("{}() got multiple values for argument '{}'", function, key));
    values_[index] = value;
  }
  for (std::size_t i = 0; i < required; ++i) {
    if (!values_[i])
      eval_fail(fmt::format("{}() missing required argument '{}'", function, *(params.begin() + i)));
  }
}

bool BoundArgs::flag(std::size_t i, bool fallback) const { return has(i) ? truthy(get(i)) : fallback; }

const std::string& string_arg(std::string_view function, std::string_view param, const Value& v) {
  if (!v.is_string()) {
    eval_fail(fmt::format("{}() argument '{}' must be str, not {}", function, param, type_name(v)));
  }
  return v.as_string();
}

std::int64_t int_arg(std::string_view function, std::string_view param, const Value& v) {
  if (!v.is_integral()) {
    eval_fail(fmt::format("{}() argument '{}' must be int, not {}", function, param, type_name(v)));
  }
  return v.as_int();
}

}  // namespace tokenmill::jinja
