// GrammarMatcher: how far a text has come through a Grammar, byte by byte, as a pushdown
// automaton. Its state is the set of parse stacks still alive: each stack is a list of
// positions in Grammar::symbols(), the top (back) being the next character class to match
// and the ones below where each enclosing rule goes on once the one above it ends. Matching a
// code point keeps the stacks whose top class takes it, advances their tops and expands rule
// references at the top into one stack per alternative, until every top is a class again (or
// the stack is empty: the text so far is a whole sentence). Bytes arrive from tokens that may
// split a UTF-8 character, so a partial character is kept and checked against the classes
// any of its completions could match.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace tokenmill {

class GrammarMatcher {
 public:
  using Stack = std::vector<uint32_t>;
  struct State {
    std::vector<Stack> stacks;   // sorted, distinct; empty: the text cannot go on
    uint32_t partial_value = 0;  // bits of a UTF-8 character received so far
    int partial_left = 0;        // continuation bytes it still needs
    uint32_t partial_min = 0;    // the least code point its length may encode (no overlong forms)

    bool operator==(const State&) const = default;
  };

  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

  // Takes `bytes` if the grammar allows them all after the text so far: true and the state
  // advanced; else false and the state unchanged.
  bool accept(std::string_view bytes);
  // Whether the text so far is a whole sentence of the grammar.
  bool accepting() const { return is_accepting(state_); }
  // Whether some more text is allowed.
  bool can_continue() const { return can_continue(state_); }

  const State& state() const { return state_; }
  const Grammar& grammar() const { return *grammar_; }

  // The same on a given state (GrammarTokenMask walks the vocabulary with these).
  bool advance(State& state, uint8_t byte) const;
  static bool is_accepting(const State& state);
  bool can_continue(const State& state) const;

 private:
  // Pushes `stack`'s expansions (tops all classes, or empty) onto `out`.
  void expand(Stack stack, std::vector<Stack>& out) const;
  bool advance_code_point(State& state, uint32_t code_point) const;
  // Whether some stack's top class matches a code point in [low, high].
  bool any_top_matches(const State& state, uint32_t low, uint32_t high) const;

  std::shared_ptr<const Grammar> grammar_;
  State state_;
};

}  // namespace tokenmill
