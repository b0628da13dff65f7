// Grammar: a context-free grammar over Unicode code points, written in GBNF (llama.cpp's
// grammar format, which its users and tools already write and generate):
//
//   root   ::= "{" ws "\"answer\":" ws answer ws "}"      # one rule per line
//   answer ::= "yes" | "no" | [0-9]+ ( "." [0-9]{1,3} )?
//   ws     ::= [ \t\n]{0,4}
//
// Alternatives `|`, sequences, groups `( )`, postfix `*` `+` `?` `{m}` `{m,}` `{m,n}`,
// literals "...", classes [a-z] and negated [^"\\], `.` (any code point), escapes \n \r \t
// \\ \" \[ \] \- \^ \xHH \uHHHH \UHHHHHHHH, comments from `#`. A rule continues on the next
// line only inside parentheses.
//
// Compiled form: every rule is a list of alternatives; every alternative a sequence of
// symbols (a character class or a reference to a rule) ending in an End symbol, all kept in
// one flat array so that a parse position is one index (see GrammarMatcher). Groups and
// repetitions become anonymous rules (x* is R ::= x R | ; x{2,3} is x x x?). Grammars that
// could recurse without consuming a character (left recursion) are refused: the matcher
// would never stop expanding them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tokenmill {

struct GrammarSymbol {
  enum class Kind : uint8_t { End, Rule, Chars };
  Kind kind = Kind::End;
  uint32_t rule = 0;                                  // Kind::Rule: the rule's index
  bool negated = false;                               // Kind::Chars: matches code points outside `ranges`
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // Kind::Chars: inclusive code point ranges

  bool matches(uint32_t code_point) const;
  // Whether some code point in [low, high] matches (a partly received UTF-8 character).
  bool matches_any(uint32_t low, uint32_t high) const;
};

class Grammar {
 public:
  // Bounds that keep a grammar from a request within memory and the matcher's recursion.
  static constexpr size_t kMaxSymbols = 200000;    // repetitions written out
  static constexpr size_t kMaxLeftNesting = 1000;  // rules started at one position
  // Parses GBNF `text`; `root` names the start rule. Throws Error with the line and what is
  // wrong (syntax, an undefined rule, left recursion, a repetition bound over 10000, groups
  // nested over 64 deep, over the bounds above).
  static Grammar parse_gbnf(std::string_view text, std::string_view root = "root");

  const std::vector<GrammarSymbol>& symbols() const { return symbols_; }
  // Where each alternative of `rule` starts in symbols().
  const std::vector<uint32_t>& alternatives(uint32_t rule) const { return rules_[rule]; }
  uint32_t root() const { return root_; }
  size_t rule_count() const { return rules_.size(); }

 private:
  friend class GbnfParser;
  std::vector<GrammarSymbol> symbols_;
  std::vector<std::vector<uint32_t>> rules_;
  uint32_t root_ = 0;
};

}  // namespace tokenmill
