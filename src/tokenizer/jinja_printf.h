// Python's printf-style `format % args` (the % operator on strings and the |format filter):
// conversions s r a d i u f F e E g G x X o c and %, with flags, width, precision and
// %(name)s mapping keys.
#pragma once

#include <string>
#include <string_view>

#include "tokenizer/jinja_value.h"

namespace tokenmill::jinja {

std::string percent_format(std::string_view format, const Value& args, Budget& budget);

}  // namespace tokenmill::jinja
