// Python's str methods as templates call them ('a,b'.split(','), content.strip(), ...):
// strip lstrip rstrip split rsplit splitlines startswith endswith replace upper lower title
// capitalize casefold swapcase find rfind index rindex count join isdigit isdecimal
// isnumeric isalpha isalnum isspace isupper islower center ljust rjust partition rpartition
// removeprefix removesuffix, and format with positional/keyword fields. Indices count code
// points, as Python's do.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "tokenizer/jinja_value.h"

namespace tokenmill::jinja {

class Interpreter;

// The method's name with static storage, or nullopt when str has no such (supported) method.
std::optional<std::string_view> str_method_name(std::string_view name);
Value call_str_method(Interpreter& in, const std::string& s, std::string_view name, const CallArgs& args);

}  // namespace tokenmill::jinja
