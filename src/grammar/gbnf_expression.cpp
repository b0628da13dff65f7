// GBNF rule-body building blocks; see gbnf_expression.h.
#include "grammar/gbnf_expression.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace tokenmill::gbnf {
namespace {

// Whether `expr` is one literal or one character class.
bool is_single_term(std::string_view expr) {
  if (expr.size() < 2 || (expr[0] != '"' && expr[0] != '[')) return false;
  char close = expr[0] == '"' ? '"' : ']';
  for (size_t i = 1; i < expr.size(); ++i) {
    if (expr[i] == '\\')
      ++i;
    else if (expr[i] == close)
      return i + 1 == expr.size();
  }
  return false;
}

// Whether `expr` is one parenthesized group.
bool is_group(std::string_view expr) {
  if (expr.empty() || expr[0] != '(') return false;
  int depth = 0;
  for (size_t i = 0; i < expr.size(); ++i) {
    char c = expr[i];
    if (c == '"' || c == '[') {  // skip a literal or class
      char close = c == '"' ? '"' : ']';
      for (++i; i < expr.size() && expr[i] != close; ++i)
        if (expr[i] == '\\') ++i;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')' && --depth == 0) {
      return i + 1 == expr.size();
    }
  }
  return false;
}

}  // namespace

std::string literal(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          out += fmt::format("\\x{:02X}", static_cast<int>(c));
        else
          out += c;
    }
  }
  return out + "\"";
}

std::string seq(std::initializer_list<std::string> parts) {
  std::string out;
  for (const std::string& part : parts)
    if (!part.empty()) out += (out.empty() ? "" : " ") + part;
  return out;
}

bool is_name(std::string_view expr) {
  return !expr.empty() && std::all_of(expr.begin(), expr.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  });
}

std::string atom(const std::string& expr) {
  return is_name(expr) || is_single_term(expr) || is_group(expr) ? expr : "( " + expr + " )";
}

std::string alternation(const std::vector<std::string>& alternatives) {
  std::string out;
  for (const std::string& alt : alternatives) out += (out.empty() ? "" : " | ") + alt;
  return out;
}

std::string repeat(const std::string& expr, int64_t min, int64_t max) {
  if (max == 0) return "";
  std::string a = atom(expr);
  if (max == kUnbounded) return min == 0 ? a + "*" : min == 1 ? a + "+" : fmt::format("{}{{{},}}", a, min);
  if (min == max) return min == 1 ? expr : fmt::format("{}{{{}}}", a, min);
  return min == 0 && max == 1 ? a + "?" : fmt::format("{}{{{},{}}}", a, min, max);
}

}  // namespace tokenmill::gbnf
