// Jinja filters (`value | name(args)`) with jinja2's semantics; `tojson` is transformers'
// override (json.dumps with ensure_ascii=False, indent, separators, sort_keys).
//
// Supported: abs attr batch capitalize center count d default dictsort e escape first float
// format indent int items join last length list lower map max min reject rejectattr replace
// reverse round safe select selectattr sort string sum title tojson trim unique upper
// wordcount. escape returns a plain string (transformers renders with autoescape off, so
// Markup only matters when escaped text is combined with more escaping).
#pragma once

#include <string_view>

#include "tokenizer/jinja_value.h"

namespace tokenmill::jinja {

class Interpreter;

bool is_supported_filter(std::string_view name);
// Whether jinja2 has a builtin filter of that name (for a precise error message).
bool is_jinja_filter(std::string_view name);
Value apply_filter(Interpreter& in, std::string_view name, const Value& subject, const CallArgs& args);

}  // namespace tokenmill::jinja
