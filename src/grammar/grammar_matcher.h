// GrammarMatcher: how far a text has come through a Grammar, byte by byte, as a pushdown
// automaton. Its state is the set of parse stacks still alive: each stack is a list of
// positions in Grammar::symbols(), the top (back) being the next character class to match
// and the ones below where each enclosing rule goes on once the one above it ends. Matching a
// code point keeps the stacks whose top class takes it, advances their tops and expands rule
// references at the top into one stack per alternative, until every top is a class again (or
// the stack is empty: the text so far is a whole sentence). Bytes arrive from tokens that may
// split a UTF-8 character, so a partial character is kept and checked against the classes
// any of its completions could match.
//
// Stacks advance independently (a state's successors are the union of its stacks'), so the
// primitive is step(): one stack, one byte, in place, without allocating; advance() on a
// state and GrammarVocabulary's walk over the vocabulary are both built on it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace tokenmill {

class GrammarMatcher {
 public:
  // The most parse stacks a state may hold: a text whose parse needs more is refused (so
  // ambiguous a grammar would make each step, and each mask, cost that much more).
  static constexpr size_t kMaxStacks = 256;
  using Stack = std::vector<uint32_t>;
  // A UTF-8 character received in part.
  struct Partial {
    uint32_t value = 0;  // its bits so far
    int left = 0;        // continuation bytes it still needs; 0: none pending
    uint32_t min = 0;    // the least code point its length may encode (no overlong forms)

    bool operator==(const Partial&) const = default;
  };
  struct State {
    std::vector<Stack> stacks;  // sorted, distinct, tops all classes (or empty); none: dead
    Partial partial;

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

  // The same on a given state.
  bool advance(State& state, uint8_t byte) const;
  static bool is_accepting(const State& state);
  static bool can_continue(const State& state);

  // Advances one expanded stack by `byte` after `partial`: calls next(stack, partial) for
  // each stack it leads to (none when the byte is refused), then leaves `stack` as it was.
  template <class Next>
  void step(Stack& stack, const Partial& partial, uint8_t byte, Next&& next) const;

 private:
  // Calls visit(stack) for each expansion of `stack` (rule references at the top replaced by
  // their alternatives until the top is a class, or the stack is empty), then restores it.
  template <class Visit>
  void expand(Stack& stack, Visit&& visit) const;
  // The top class matched code point `code_point`: advance past it and expand.
  template <class Next>
  void consume(Stack& stack, Next&& next) const;

  std::shared_ptr<const Grammar> grammar_;
  State state_;
};

template <class Visit>
void GrammarMatcher::expand(Stack& stack, Visit&& visit) const {
  using Kind = GrammarSymbol::Kind;
  const std::vector<GrammarSymbol>& symbols = grammar_->symbols();
  if (!stack.empty() && symbols[stack.back()].kind == Kind::End) {
    // An alternative ended: its rule's caller goes on. Continuations below the top are never
    // End (one that would be is not kept; see below), so one pop is enough.
    const uint32_t ended = stack.back();
    stack.pop_back();
    expand(stack, visit);
    stack.push_back(ended);
    return;
  }
  if (stack.empty() || symbols[stack.back()].kind == Kind::Chars) {
    visit(stack);
    return;
  }
  const uint32_t position = stack.back();
  // Where this rule goes on after the referenced one; nothing to keep when it ends there.
  const bool tail = symbols[position + 1].kind == Kind::End;
  if (tail)
    stack.pop_back();
  else
    stack.back() = position + 1;
  for (const uint32_t start : grammar_->alternatives(symbols[position].rule)) {
    stack.push_back(start);
    expand(stack, visit);
    stack.pop_back();
  }
  if (tail)
    stack.push_back(position);
  else
    stack.back() = position;
}

template <class Next>
void GrammarMatcher::consume(Stack& stack, Next&& next) const {
  ++stack.back();
  expand(stack, [&](Stack& s) { next(s, Partial{}); });
  --stack.back();
}

template <class Next>
void GrammarMatcher::step(Stack& stack, const Partial& partial, uint8_t byte, Next&& next) const {
  if (stack.empty()) return;  // a whole sentence takes nothing more
  const GrammarSymbol& top = grammar_->symbols()[stack.back()];
  if (partial.left == 0) {
    if (byte < 0x80) {
      if (top.matches(byte)) consume(stack, next);
      return;
    }
    // A lead byte: 2, 3 or 4 bytes (0xC0, 0xC1 and 0xF5.. start only overlong or invalid ones).
    const int length = byte >= 0xC2 && byte <= 0xDF   ? 2
                       : byte >= 0xE0 && byte <= 0xEF ? 3
                       : byte >= 0xF0 && byte <= 0xF4 ? 4
                                                      : 0;
    if (length == 0) return;
    const Partial p{.value = byte & (0xFFu >> (length + 1)),
                    .left = length - 1,
                    .min = length == 2   ? 0x80u
                           : length == 3 ? 0x800u
                                         : 0x10000u};
    const int bits = 6 * p.left;
    const uint32_t low = std::max(p.value << bits, p.min);
    const uint32_t high = std::min((p.value << bits) | ((1u << bits) - 1), 0x10FFFFu);
    if (low <= high && top.matches_any(low, high)) next(stack, p);
    return;
  }
  if ((byte & 0xC0) != 0x80) return;
  const uint32_t value = (partial.value << 6) | (byte & 0x3Fu);
  if (partial.left == 1) {
    const bool valid =
        value >= partial.min && !(value >= 0xD800 && value <= 0xDFFF);  // no overlong, no surrogate
    if (valid && top.matches(value)) consume(stack, next);
    return;
  }
  const Partial p{.value = value, .left = partial.left - 1, .min = partial.min};
  const int bits = 6 * p.left;
  const uint32_t low = std::max(value << bits, p.min);
  const uint32_t high = std::min((value << bits) | ((1u << bits) - 1), 0x10FFFFu);
  if (low <= high && top.matches_any(low, high)) next(stack, p);
}

}  // namespace tokenmill
