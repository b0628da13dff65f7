// Jinja tests (`value is name(args)`), all of jinja2's builtin tests:
// boolean callable defined divisibleby eq equalto escaped even false filter float ge gt
// greaterthan in integer iterable le lessthan lower lt mapping ne none number odd sameas
// sequence string test true undefined upper, and the operator spellings == != < <= > >=.
#pragma once

#include <string_view>

#include "tokenizer/jinja_value.h"

namespace tokenmill::jinja {

class Interpreter;

bool is_supported_test(std::string_view name);
bool is_jinja_test(std::string_view name);
bool apply_test(Interpreter& in, std::string_view name, const Value& subject, const CallArgs& args);

}  // namespace tokenmill::jinja
