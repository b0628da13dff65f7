// JSON Schema `pattern` -> GBNF; see regex_grammar.h.
#include "grammar/regex_grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "grammar/gbnf_expression.h"
#include "tokenizer/utf8.h"

namespace tokenmill::gbnf {
namespace {

constexpr int kMaxGroupDepth = 64;  // open groups: bounds the recursion

// A set of code points: sorted, disjoint, inclusive ranges.
using CodePoints = std::vector<std::pair<uint32_t, uint32_t>>;

CodePoints normalized(CodePoints set) {
  std::sort(set.begin(), set.end());
  CodePoints out;
  for (const auto& [lo, hi] : set)
    if (!out.empty() && lo <= out.back().second + 1)
      out.back().second = std::max(out.back().second, hi);
    else
      out.emplace_back(lo, hi);
  return out;
}

bool contains(const CodePoints& set, uint32_t c) {
  return std::any_of(set.begin(), set.end(), [&](const auto& r) { return r.first <= c && c <= r.second; });
}

// `set` without the code points of `removed`.
CodePoints without(const CodePoints& set, const CodePoints& removed) {
  CodePoints out;
  for (auto [lo, hi] : set) {
    for (const auto& [rlo, rhi] : removed) {
      if (rhi < lo || rlo > hi) continue;
      if (rlo > lo) out.emplace_back(lo, rlo - 1);
      lo = rhi + 1;
      if (rhi >= hi) break;
    }
    if (lo <= hi) out.emplace_back(lo, hi);  // code points stay far below overflow
  }
  return out;
}

std::string utf8(uint32_t c) {
  std::string out;
  tokenmill::utf8::append(out, static_cast<char32_t>(c));
  return out;
}

std::string class_char(uint32_t c) {
  if (c < 0x20) return fmt::format("\\x{:02X}", c);
  if (c == ']' || c == '[' || c == '\\' || c == '^' || c == '-')
    return std::string("\\") + static_cast<char>(c);
  return utf8(c);
}

const CodePoints kNeedEscape = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
// The control characters a string may hold as a short escape, with that escape.
const std::vector<std::pair<uint32_t, const char*>> kShortEscapes = {
    {'\t', R"("\\t")"}, {'\n', R"("\\n")"}, {'\r', R"("\\r")"}, {'\f', R"("\\f")"}, {'\b', R"("\\b")"}};

// The inside of a GBNF class holding `set`.
std::string class_body(const CodePoints& set) {
  std::string body;
  for (const auto& [lo, hi] : set) body += lo == hi ? class_char(lo) : class_char(lo) + "-" + class_char(hi);
  return body;
}

// One JSON-encoded string character in `set` (or outside it when `negated`): raw where JSON
// allows it, else as its escape (`"` `\` and the short escapes; other control characters never).
std::string json_char_in(const CodePoints& set, bool negated) {
  std::vector<std::string> alternatives;
  if (negated) {
    CodePoints excluded = set;
    excluded.insert(excluded.end(), kNeedEscape.begin(), kNeedEscape.end());
    alternatives.push_back(fmt::format("[^{}]", class_body(normalized(excluded))));
  } else if (CodePoints raw = without(set, kNeedEscape); !raw.empty()) {
    bool one = raw.size() == 1 && raw[0].first == raw[0].second;
    alternatives.push_back(one ? literal(utf8(raw[0].first)) : fmt::format("[{}]", class_body(raw)));
  }
  if (contains(set, '"') != negated) alternatives.push_back(R"("\\\"")");
  if (contains(set, '\\') != negated) alternatives.push_back(R"("\\\\")");
  for (const auto& [c, escape] : kShortEscapes)
    if (contains(set, c) != negated) alternatives.push_back(escape);
  return alternation(alternatives);  // "" if no character can be written
}

// Converts an ECMA-262 pattern (the subset: literals, escapes \d \w \s \D \W \S \t \n \r \f \v
// \xHH \uHHHH and escaped punctuation, `.`, classes, groups (...) and (?:...), `|`, quantifiers
// * + ? {m} {m,} {m,n}, lazy ones alike, ^ and $ at the ends of top-level alternatives) into the
// GBNF of a string's JSON-encoded contents. Unanchored ends match any characters, as JSON Schema
// searches. Control characters other than \t \n \r \f \b are never matched by classes or `.`.
class PatternConverter {
 public:
  PatternConverter(std::string_view pattern, std::string where) : where_(std::move(where)) {
    for (size_t i = 0; i < pattern.size();) {
      auto byte = static_cast<unsigned char>(pattern[i]);
      int length = byte < 0x80 ? 1 : byte < 0xE0 ? 2 : byte < 0xF0 ? 3 : 4;
      uint32_t c = length == 1 ? byte : byte & (0x3F >> (length - 1));
      for (int k = 1; k < length && i + k < pattern.size(); ++k) c = (c << 6) | (pattern[i + k] & 0x3F);
      text_.push_back(c);
      i += length;
    }
  }

  // The contents; `any_char` is the rule for any JSON string character.
  std::string convert(const std::string& any_char) {
    std::vector<std::string> list;  // anchors belong to the top-level alternatives
    do {
      bool anchored_start = eat('^');
      std::string body = sequence();
      bool anchored_end = eat('$');
      std::string star = any_char + "*";
      list.push_back(seq({anchored_start ? "" : star, body, anchored_end ? "" : star}));
    } while (eat('|'));
    if (!at_end()) refuse("an unmatched ')'");
    return list.size() == 1 ? list[0] : "( " + alternation(list) + " )";
  }

 private:
  [[noreturn]] void refuse(std::string_view what) const {
    fail(
        "{}: {} at offset {} is not supported (supported: literals, ., classes, groups, |, quantifiers, "
        "\\d \\w \\s, ^ and $ at the ends)",
        where_, what, pos_);
  }
  bool at_end() const { return pos_ >= text_.size(); }
  bool eat(uint32_t c) {
    if (at_end() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  uint32_t next() {
    if (at_end()) refuse("the pattern's end");
    return text_[pos_++];
  }

  // Whether a '$' ending a top-level alternative comes next.
  bool at_final_dollar() const {
    return depth_ == 0 && text_[pos_] == '$' && (pos_ + 1 == text_.size() || text_[pos_ + 1] == '|');
  }

  std::string alternatives() {
    std::vector<std::string> list = {sequence()};
    while (eat('|')) list.push_back(sequence());
    return list.size() == 1 ? list[0] : "( " + alternation(list) + " )";
  }

  // Juxtaposed quantified atoms; runs of plain characters become one literal.
  std::string sequence() {
    std::vector<std::string> parts;
    std::string run;  // JSON-encoded characters not yet written
    auto flush = [&] {
      if (!run.empty()) parts.push_back(literal(run));
      run.clear();
    };
    while (!at_end() && text_[pos_] != '|' && text_[pos_] != ')' && !at_final_dollar()) {
      auto [expr, plain] = single();
      auto [min, max] = quantifier();
      if (plain && min == 1 && max == 1) {
        run += *plain;
        continue;
      }
      flush();
      parts.push_back(min == 1 && max == 1 ? atom(expr) : repeat(expr, min, max));
    }
    flush();
    std::string out;
    for (const std::string& part : parts) out = seq({out, part});
    return out.empty() ? R"("")" : out;
  }

  std::pair<int64_t, int64_t> quantifier() {
    std::pair<int64_t, int64_t> bounds = {1, 1};
    if (eat('*'))
      bounds = {0, kUnbounded};
    else if (eat('+'))
      bounds = {1, kUnbounded};
    else if (eat('?'))
      bounds = {0, 1};
    else if (eat('{')) {
      bounds.first = number();
      bounds.second = !eat(',') ? bounds.first : !at_end() && text_[pos_] == '}' ? kUnbounded : number();
      if (!eat('}')) refuse("a '{' that is not a quantifier {m}, {m,} or {m,n}");
      if (bounds.second != kUnbounded && bounds.first > bounds.second)
        refuse("a quantifier {m,n} with m > n");
    } else {
      return bounds;
    }
    eat('?');  // lazy: the same strings match
    if (!at_end() && (text_[pos_] == '*' || text_[pos_] == '+' || text_[pos_] == '?' || text_[pos_] == '{'))
      refuse("a quantifier after a quantifier");
    return bounds;
  }

  int64_t number() {
    int64_t n = 0;
    if (at_end() || text_[pos_] < '0' || text_[pos_] > '9') refuse("a quantifier without a number");
    while (!at_end() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      n = n * 10 + (text_[pos_++] - '0');
      if (n > kMaxCount) refuse(fmt::format("a repetition bound over {}", kMaxCount));
    }
    return n;
  }

  // One atom: its expression and, for a plain character, its JSON encoding.
  std::pair<std::string, std::optional<std::string>> single() {
    uint32_t c = next();
    switch (c) {
      case '(': {
        if (eat('?') && !eat(':')) refuse("a lookaround or named group");
        if (++depth_ > kMaxGroupDepth) refuse(fmt::format("groups nested deeper than {}", kMaxGroupDepth));
        std::string body = alternatives();
        --depth_;
        if (!eat(')')) refuse("an unclosed '('");
        return {atom(body), std::nullopt};
      }
      case '[': return {char_class(), std::nullopt};
      case '.': return {chars({{'\n', '\n'}, {'\r', '\r'}}, true), std::nullopt};
      case '*':
      case '+':
      case '?':
      case '{': refuse("a quantifier with nothing to repeat");
      case '^':
      case '$': refuse("an anchor inside the pattern");
      case ')': refuse("an unmatched ')'");
      case '\\': {
        auto [set, negated] = escape(false);
        if (!negated && set.size() == 1 && set[0].first == set[0].second) return plain(set[0].first);
        return {chars(set, negated), std::nullopt};
      }
      default: return plain(c);
    }
  }

  std::pair<std::string, std::optional<std::string>> plain(uint32_t c) {
    std::string encoded = nlohmann::json(utf8(c)).dump();
    encoded = encoded.substr(1, encoded.size() - 2);
    return {literal(encoded), encoded};
  }

  // After a backslash: the set it stands for and whether it is negated (\D \W \S).
  std::pair<CodePoints, bool> escape(bool in_class) {
    uint32_t c = next();
    switch (c) {
      case 'd': return {{{'0', '9'}}, false};
      case 'D': return {{{'0', '9'}}, true};
      case 'w': return {{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}, false};
      case 'W': return {{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}, true};
      case 's': return {{{'\t', '\r'}, {' ', ' '}}, false};
      case 'S': return {{{'\t', '\r'}, {' ', ' '}}, true};
      case 't': return {{{'\t', '\t'}}, false};
      case 'n': return {{{'\n', '\n'}}, false};
      case 'r': return {{{'\r', '\r'}}, false};
      case 'f': return {{{'\f', '\f'}}, false};
      case 'v': return {{{'\v', '\v'}}, false};
      case 'x':
      case 'u': {
        uint32_t value = 0;
        for (int k = 0; k < (c == 'x' ? 2 : 4); ++k) {
          uint32_t h = next();
          if (h >= 0x80 || !std::isxdigit(static_cast<int>(h))) refuse("a bad \\x or \\u escape");
          value = value * 16 + (h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
        }
        return {{{value, value}}, false};
      }
      default:
        if (c < 0x80 && (std::isalnum(static_cast<int>(c)) && !(in_class && c == 'b')))
          refuse(fmt::format("the escape \\{}", static_cast<char>(c)));
        if (in_class && c == 'b') return {{{'\b', '\b'}}, false};
        return {{{c, c}}, false};  // escaped punctuation
    }
  }

  // After '[': the class up to its ']' as a JSON-encoded character.
  std::string char_class() {
    bool negated = eat('^');
    CodePoints set;
    bool first = true;
    while (first || at_end() || text_[pos_] != ']') {
      first = false;
      uint32_t c = next();
      CodePoints item;
      if (c == '\\') {
        auto [escaped, negated_escape] = escape(true);
        if (negated_escape) refuse("\\D \\W or \\S inside a class");
        item = escaped;
      } else {
        item = {{c, c}};
      }
      if (item.size() == 1 && item[0].first == item[0].second && pos_ + 1 < text_.size() &&
          text_[pos_] == '-' && text_[pos_ + 1] != ']') {
        ++pos_;
        uint32_t hi = next();
        if (hi == '\\') {
          auto [escaped, negated_escape] = escape(true);
          if (negated_escape || escaped.size() != 1 || escaped[0].first != escaped[0].second)
            refuse("a bad range");
          hi = escaped[0].first;
        }
        if (hi < item[0].first) refuse("a range out of order");
        item[0].second = hi;
      }
      set.insert(set.end(), item.begin(), item.end());
    }
    ++pos_;  // ']'
    return chars(normalized(set), negated);
  }

  std::string chars(const CodePoints& set, bool negated) {
    std::string out = json_char_in(set, negated);
    if (out.empty()) refuse("a set of only control characters without a short JSON escape");
    return out;
  }

  std::string where_;
  std::u32string text_;
  size_t pos_ = 0;
  int depth_ = 0;  // open groups
};

}  // namespace

std::string pattern_to_gbnf(std::string_view pattern, const std::string& where, const std::string& any_char) {
  return PatternConverter(pattern, where).convert(any_char);
}

}  // namespace tokenmill::gbnf
