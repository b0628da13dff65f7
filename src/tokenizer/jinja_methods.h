// What templates reach through attributes: Python's str, dict, list and tuple methods (bound
// to their object; see jinja_str_methods.h), loop.*, and namespace attributes.
//
// As in the ImmutableSandboxedEnvironment, methods that would mutate a list or dict
// (append, pop, update, ...) resolve to an undefined value that fails when called.
#pragma once

#include <optional>
#include <string_view>

#include "tokenizer/jinja_value.h"

namespace tokenmill::jinja {

class Interpreter;

// obj.name for builtin values, or nullopt when there is no such attribute.
std::optional<Value> builtin_attribute(Interpreter& in, const Value& obj, std::string_view name);
// Calls a global function (jinja_globals.h), a bound method or a loop method (cycle, changed).
Value call_builtin(Interpreter& in, const Callable& fn, const CallArgs& args);

}  // namespace tokenmill::jinja
