// GBNF for the JSON Schema string formats with a grammar: "date" and "time" (RFC 3339
// full-date and full-time, seconds fraction of at most 9 digits), "date-time" (the two joined by
// "T") and "uuid" (8-4-4-4-12 hex digits, either case). Each rule matches the string's contents,
// between its quotes; calendar checks (days per month, leap seconds) are left out.
#pragma once

#include <vector>

#include "grammar/gbnf_expression.h"

namespace tokenmill::gbnf {

// The format rules, each named as its format and listing the format rules it uses, in the order
// they are written out.
const std::vector<SharedRule>& string_format_rules();

}  // namespace tokenmill::gbnf
