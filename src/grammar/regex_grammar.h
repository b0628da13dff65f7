// JSON Schema `pattern` -> GBNF: a subset of ECMA-262 regular expressions, matched against the
// characters of a JSON string and written over the string's JSON encoding.
//
// Supported: literals, `.`, classes [a-z] [^...], \d \w \s \D \W \S, escapes \t \n \r \f \v
// \xHH \uHHHH and escaped punctuation (and \b inside a class), groups (...) and (?:...), `|`,
// quantifiers * + ? {m} {m,} {m,n} (lazy ones alike: the same strings match), ^ and $ at the
// ends of top-level alternatives. Refused: backreferences, lookaround, named groups, \b outside
// a class, flags, anchors inside the pattern, repetition bounds over gbnf::kMaxCount and groups
// nested deeper than 64.
//
// Narrowings: a matched character is written in the one JSON encoding nlohmann::json uses (no
// \/ nor \u escapes except for control characters), and classes and `.` never match control
// characters other than \t \n \r \f \b.
#pragma once

#include <string>
#include <string_view>

namespace tokenmill::gbnf {

// GBNF for the contents (between the quotes) of the JSON strings that `pattern` (UTF-8) matches.
// Ends not anchored by ^ or $ match any characters, as JSON Schema searches: they become
// `any_char*`, `any_char` naming the rule for one JSON string character. Throws Error, naming
// `where` (the keyword's JSON pointer) and the offset, for anything unsupported.
std::string pattern_to_gbnf(std::string_view pattern, const std::string& where, const std::string& any_char);

}  // namespace tokenmill::gbnf
