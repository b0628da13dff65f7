// Building blocks for GBNF rule bodies (the dialect of grammar.h): literals, sequences,
// alternations and bounded repetitions, spelled the one way json_schema_to_gbnf writes them
// (single spaces between terms, "( ... )" only where an operator needs a group).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace tokenmill::gbnf {

inline constexpr int64_t kUnbounded = -1;     // a repetition without upper bound
inline constexpr int64_t kMaxCount = 10'000;  // the largest repetition bound GBNF takes (grammar.h)

// A rule written once and referenced by name: its body and the shared rules that body uses.
struct SharedRule {
  const char* name;
  const char* body;
  std::vector<const char*> uses;
};

// A GBNF string literal matching `text` exactly (UTF-8 passes through).
std::string literal(std::string_view text);

// Space-joins the non-empty parts.
std::string seq(std::initializer_list<std::string> parts);

// Whether `expr` is a rule name: non-empty, of [a-zA-Z0-9_-] only.
bool is_name(std::string_view expr);

// `expr` usable under a postfix operator: itself when it is a rule name, one literal, one
// character class or one parenthesized group, else "( expr )".
std::string atom(const std::string& expr);

// The alternatives joined by " | " (no group around them).
std::string alternation(const std::vector<std::string>& alternatives);

// `expr` repeated between `min` and `max` (kUnbounded) times; "" when max is 0.
std::string repeat(const std::string& expr, int64_t min, int64_t max);

}  // namespace tokenmill::gbnf
