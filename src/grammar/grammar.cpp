#include "grammar/grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>

#include "core/error.h"

namespace tokenmill {

bool GrammarSymbol::matches(uint32_t code_point) const {
  const bool in = std::any_of(ranges.begin(), ranges.end(),
                              [&](const auto& r) { return code_point >= r.first && code_point <= r.second; });
  return in != negated;
}

bool GrammarSymbol::matches_any(uint32_t low, uint32_t high) const {
  if (!negated) {
    return std::any_of(ranges.begin(), ranges.end(),
                       [&](const auto& r) { return r.first <= high && low <= r.second; });
  }
  // Negated: some code point of [low, high] lies outside every range.
  for (uint32_t cp = low;;) {
    const auto covering = std::find_if(ranges.begin(), ranges.end(),
                                       [&](const auto& r) { return cp >= r.first && cp <= r.second; });
    if (covering == ranges.end()) return true;
    if (covering->second >= high) return false;
    cp = covering->second + 1;
  }
}

namespace {

constexpr uint32_t kMaxRepetition = 10000;
constexpr int kMaxGroupNesting = 64;

using Symbol = GrammarSymbol;
using Sequence = std::vector<Symbol>;

Symbol rule_symbol(uint32_t rule) {
  Symbol s;
  s.kind = Symbol::Kind::Rule;
  s.rule = rule;
  return s;
}

Symbol chars_symbol(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated) {
  Symbol s;
  s.kind = Symbol::Kind::Chars;
  s.ranges = std::move(ranges);
  s.negated = negated;
  return s;
}

}  // namespace

// Recursive descent over the GBNF text into rules of alternatives of symbol sequences.
class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : text_(text) {}

  Grammar parse(std::string_view root) {
    for (skip_space(true); pos_ < text_.size(); skip_space(true)) parse_rule();
    for (const auto& [name, index] : names_)
      if (!defined_[index]) fail("grammar: rule '{}' is used but never defined", name);
    const auto found = names_.find(std::string(root));
    if (found == names_.end()) fail("grammar: no rule '{}' to start from", root);
    Grammar g;
    g.root_ = found->second;
    for (const std::vector<Sequence>& alternatives : rules_) {
      std::vector<uint32_t>& starts = g.rules_.emplace_back();
      for (const Sequence& sequence : alternatives) {
        starts.push_back(static_cast<uint32_t>(g.symbols_.size()));
        g.symbols_.insert(g.symbols_.end(), sequence.begin(), sequence.end());
        g.symbols_.emplace_back();  // End
      }
    }
    if (g.symbols_.size() > Grammar::kMaxSymbols)
      fail("grammar: too large: {} symbols (at most {})", g.symbols_.size(), Grammar::kMaxSymbols);
    check_no_left_recursion();
    return g;
  }

 private:
  [[noreturn]] void error(std::string_view what) const {
    const auto line = 1 + std::count(text_.begin(), text_.begin() + static_cast<std::ptrdiff_t>(pos_), '\n');
    fail("grammar: line {}: {}", line, what);
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  // Skips spaces, tabs and comments; newlines too when `newlines`.
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    if (pos_ == start) error(fmt::format("expected a rule name, found '{}'", peek()));
    return std::string(text_.substr(start, pos_ - start));
  }

  uint32_t rule_index(const std::string& name) {
    const auto [it, added] = names_.try_emplace(name, static_cast<uint32_t>(rules_.size()));
    if (added) {
      rules_.emplace_back();
      defined_.push_back(false);
      rule_names_.push_back(name);
    }
    return it->second;
  }

  uint32_t new_rule(std::vector<Sequence> alternatives, const std::string& name) {
    const auto index = static_cast<uint32_t>(rules_.size());
    rules_.push_back(std::move(alternatives));
    defined_.push_back(true);
    rule_names_.push_back(name);
    return index;
  }

  void parse_rule() {
    const std::string name = parse_name();
    skip_space(false);
    if (text_.substr(pos_, 3) != "::=") error(fmt::format("expected '::=' after '{}'", name));
    pos_ += 3;
    const uint32_t index = rule_index(name);
    if (defined_[index]) error(fmt::format("rule '{}' is defined twice", name));
    defined_[index] = true;
    current_rule_ = name;
    rules_[index] = parse_alternatives(false);
    if (!at_end() && peek() != '\n') error(fmt::format("unexpected '{}'", peek()));
  }

  std::vector<Sequence> parse_alternatives(bool nested) {
    if (nested && ++nesting_ > kMaxGroupNesting)
      error(fmt::format("groups nest more than {} deep", kMaxGroupNesting));
    std::vector<Sequence> alternatives{parse_sequence(nested)};
    while (peek() == '|') {
      ++pos_;
      alternatives.push_back(parse_sequence(nested));
    }
    if (nested) --nesting_;
    return alternatives;
  }

  Sequence parse_sequence(bool nested) {
    Sequence sequence;
    for (skip_space(nested); !at_end() && peek() != '|' && peek() != ')' && peek() != '\n';
         skip_space(nested)) {
      Sequence item = parse_item();
      item = parse_postfix(std::move(item));
      sequence.insert(sequence.end(), item.begin(), item.end());
    }
    return sequence;
  }

  Sequence parse_item() {
    spend(1);
    const char c = peek();
    if (c == '"') {
      ++pos_;
      Sequence literal;
      while (peek() != '"') {
        if (at_end() || peek() == '\n') error("unterminated string literal");
        const uint32_t cp = parse_char();
        literal.push_back(chars_symbol({{cp, cp}}, false));
        spend(1);
      }
      ++pos_;
      return literal;
    }
    if (c == '[') return {parse_class()};
    if (c == '.') {
      ++pos_;
      return {chars_symbol({}, true)};
    }
    if (c == '(') {
      ++pos_;
      std::vector<Sequence> alternatives = parse_alternatives(true);
      skip_space(true);
      if (peek() != ')') error("expected ')'");
      ++pos_;
      return {rule_symbol(new_rule(std::move(alternatives), current_rule_ + "-group"))};
    }
    if (is_name_char(c)) return {rule_symbol(rule_index(parse_name()))};
    error(fmt::format("unexpected '{}'", c));
  }

  Symbol parse_class() {
    ++pos_;  // '['
    const bool negated = peek() == '^';
    if (negated) ++pos_;
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    while (peek() != ']') {
      if (at_end() || peek() == '\n') error("unterminated character class");
      const uint32_t low = parse_char();
      uint32_t high = low;
      if (peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        ++pos_;
        high = parse_char();
        if (high < low) error("a character range goes backwards");
      }
      ranges.emplace_back(low, high);
    }
    ++pos_;
    return chars_symbol(std::move(ranges), negated);
  }

  // One character of a literal or a class: an escape or a UTF-8 encoded code point.
  uint32_t parse_char() {
    if (peek() == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/': return static_cast<unsigned char>(e);
        default: error(fmt::format("unknown escape '\\{}'", e));
      }
    }
    const auto lead = static_cast<unsigned char>(peek());
    const int length = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
    if (length == 0 || pos_ + static_cast<size_t>(length) > text_.size()) error("invalid UTF-8");
    uint32_t cp = length == 1 ? lead : lead & (0xFFu >> (length + 1));
    for (int i = 1; i < length; ++i) {
      const auto b = static_cast<unsigned char>(text_[pos_ + static_cast<size_t>(i)]);
      if ((b & 0xC0) != 0x80) error("invalid UTF-8");
      cp = (cp << 6) | (b & 0x3F);
    }
    pos_ += static_cast<size_t>(length);
    return cp;
  }

  uint32_t parse_hex(int digits) {
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) error(fmt::format("expected {} hexadecimal digits", digits));
      value = value * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (value > 0x10FFFF) error("a code point beyond U+10FFFF");
    return value;
  }

  std::optional<uint32_t> parse_bound() {
    skip_space(true);
    if (!(peek() >= '0' && peek() <= '9')) return std::nullopt;
    uint32_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      value = value * 10 + static_cast<uint32_t>(peek() - '0');
      if (value > kMaxRepetition) error(fmt::format("a repetition bound over {}", kMaxRepetition));
      ++pos_;
    }
    skip_space(true);
    return value;
  }

  // Applies a postfix operator, if any, to `item`.
  Sequence parse_postfix(Sequence item) {
    const char op = peek();
    if (op != '*' && op != '+' && op != '?' && op != '{') return item;
    ++pos_;
    uint32_t min = 0;
    std::optional<uint32_t> max;
    if (op == '+') min = 1;
    if (op == '?') max = 1;
    if (op == '{') {
      const std::optional<uint32_t> m = parse_bound();
      if (!m) error("expected a number after '{'");
      min = *m;
      max = m;
      if (peek() == ',') {
        ++pos_;
        max = parse_bound();
      }
      if (peek() != '}') error("expected '}'");
      ++pos_;
      if (max && *max < min) error("a repetition's maximum is below its minimum");
    }
    return repeat(item, min, max);
  }

  // item{min,max}: min copies, then max - min nested optional copies (or a starred rule).
  Sequence repeat(const Sequence& item, uint32_t min, std::optional<uint32_t> max) {
    const std::string name = current_rule_ + "-repeat";
    // Each copy costs the item and a rule reference; refuse before building what is too large.
    spend((static_cast<size_t>(max.value_or(min + 1)) + 1) * (item.size() + 2));
    Sequence out;
    for (uint32_t i = 0; i < min; ++i) out.insert(out.end(), item.begin(), item.end());
    if (!max) {
      const uint32_t star = new_rule({}, name);
      Sequence again = item;
      again.push_back(rule_symbol(star));
      rules_[star] = {again, {}};
      out.push_back(rule_symbol(star));
      return out;
    }
    std::optional<uint32_t> tail;  // (item tail)? built from the innermost out
    for (uint32_t i = min; i < *max; ++i) {
      Sequence once = item;
      if (tail) once.push_back(rule_symbol(*tail));
      tail = new_rule({once, {}}, name);
    }
    if (tail) out.push_back(rule_symbol(*tail));
    return out;
  }

  // Counts `symbols` against kMaxSymbols.
  void spend(size_t symbols) {
    spent_ += symbols;
    if (spent_ > Grammar::kMaxSymbols)
      error(fmt::format("the grammar is too large: over {} symbols once repetitions are written out",
                        Grammar::kMaxSymbols));
  }

  // Left recursion: a rule reachable from itself through first symbols that can all be empty.
  // Also bounds how deep rules nest at the start of a match (the matcher expands them
  // recursively).
  void check_no_left_recursion() const {
    std::vector<bool> nullable(rules_.size(), false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < rules_.size(); ++r) {
        if (nullable[r]) continue;
        for (const Sequence& s : rules_[r]) {
          if (std::all_of(s.begin(), s.end(), [&](const Symbol& x) {
                return x.kind == Symbol::Kind::Rule && nullable[x.rule];
              })) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    // 0 unvisited, 1 on the current path, 2 done.
    std::vector<int> state(rules_.size(), 0);
    const std::function<void(uint32_t, size_t)> visit = [&](uint32_t r, size_t depth) {
      if (depth > Grammar::kMaxLeftNesting)
        fail("grammar: rules nest more than {} deep at the start of a match (rule '{}')",
             Grammar::kMaxLeftNesting, rule_names_[r]);
      state[r] = 1;
      for (const Sequence& s : rules_[r]) {
        for (const Symbol& x : s) {
          if (x.kind != Symbol::Kind::Rule) break;
          if (state[x.rule] == 1)
            fail(
                "grammar: rule '{}' can recurse without consuming a character (left recursion, or a "
                "repetition of something that can be empty)",
                rule_names_[x.rule]);
          if (state[x.rule] == 0) visit(x.rule, depth + 1);
          if (!nullable[x.rule]) break;
        }
      }
      state[r] = 2;
    };
    for (uint32_t r = 0; r < rules_.size(); ++r)
      if (state[r] == 0) visit(r, 0);
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::map<std::string, uint32_t> names_;
  std::vector<std::vector<Sequence>> rules_;
  std::vector<bool> defined_;
  std::vector<std::string> rule_names_;
  std::string current_rule_;
  int nesting_ = 0;   // open groups
  size_t spent_ = 0;  // symbols written or about to be
};

Grammar Grammar::parse_gbnf(std::string_view text, std::string_view root) {
  return GbnfParser(text).parse(root);
}

}  // namespace tokenmill
