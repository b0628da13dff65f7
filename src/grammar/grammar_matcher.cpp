#include "grammar/grammar_matcher.h"

#include <algorithm>
#include <utility>

namespace tokenmill {

namespace {

using Kind = GrammarSymbol::Kind;

void sort_unique(std::vector<GrammarMatcher::Stack>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  for (const uint32_t start : grammar_->alternatives(grammar_->root())) expand(Stack{start}, state_.stacks);
  sort_unique(state_.stacks);
}

void GrammarMatcher::expand(Stack stack, std::vector<Stack>& out) const {
  const std::vector<GrammarSymbol>& symbols = grammar_->symbols();
  while (!stack.empty() && symbols[stack.back()].kind == Kind::End) stack.pop_back();
  if (stack.empty() || symbols[stack.back()].kind == Kind::Chars) {
    out.push_back(std::move(stack));
    return;
  }
  const uint32_t position = stack.back();
  // Where this rule goes on after the referenced one; nothing to keep when it ends there.
  if (symbols[position + 1].kind == Kind::End)
    stack.pop_back();
  else
    stack.back() = position + 1;
  const std::vector<uint32_t>& alternatives = grammar_->alternatives(symbols[position].rule);
  for (size_t i = 0; i < alternatives.size(); ++i) {
    Stack next = i + 1 < alternatives.size() ? stack : std::move(stack);
    next.push_back(alternatives[i]);
    expand(std::move(next), out);
  }
}

bool GrammarMatcher::advance_code_point(State& state, uint32_t code_point) const {
  const std::vector<GrammarSymbol>& symbols = grammar_->symbols();
  std::vector<Stack> next;
  for (const Stack& stack : state.stacks) {
    if (stack.empty() || !symbols[stack.back()].matches(code_point)) continue;
    Stack advanced = stack;
    ++advanced.back();
    expand(std::move(advanced), next);
  }
  if (next.empty()) return false;
  sort_unique(next);
  state.stacks = std::move(next);
  return true;
}

bool GrammarMatcher::any_top_matches(const State& state, uint32_t low, uint32_t high) const {
  const std::vector<GrammarSymbol>& symbols = grammar_->symbols();
  return std::any_of(state.stacks.begin(), state.stacks.end(),
                     [&](const Stack& s) { return !s.empty() && symbols[s.back()].matches_any(low, high); });
}

bool GrammarMatcher::advance(State& state, uint8_t byte) const {
  if (state.partial_left == 0) {
    if (byte < 0x80) return advance_code_point(state, byte);
    // A lead byte: 2, 3 or 4 bytes (0xC0, 0xC1 and 0xF5.. start only overlong or invalid ones).
    const int length = byte >= 0xC2 && byte <= 0xDF   ? 2
                       : byte >= 0xE0 && byte <= 0xEF ? 3
                       : byte >= 0xF0 && byte <= 0xF4 ? 4
                                                      : 0;
    if (length == 0) return false;
    State next = state;
    next.partial_value = byte & (0xFFu >> (length + 1));
    next.partial_left = length - 1;
    next.partial_min = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000;
    const int bits = 6 * next.partial_left;
    const uint32_t low = std::max<uint32_t>(next.partial_value << bits, next.partial_min);
    const uint32_t high = std::min<uint32_t>((next.partial_value << bits) | ((1u << bits) - 1), 0x10FFFF);
    if (low > high || !any_top_matches(state, low, high)) return false;
    state = std::move(next);
    return true;
  }
  if ((byte & 0xC0) != 0x80) return false;
  const uint32_t value = (state.partial_value << 6) | (byte & 0x3Fu);
  const int left = state.partial_left - 1;
  if (left == 0) {
    if ((value >= 0xD800 && value <= 0xDFFF) || value < state.partial_min)
      return false;  // surrogates, overlong
    State next = state;
    next.partial_value = 0;
    next.partial_left = 0;
    next.partial_min = 0;
    if (!advance_code_point(next, value)) return false;
    state = std::move(next);
    return true;
  }
  const int bits = 6 * left;
  const uint32_t low = std::max<uint32_t>(value << bits, state.partial_min);
  const uint32_t high = std::min<uint32_t>((value << bits) | ((1u << bits) - 1), 0x10FFFF);
  if (low > high || !any_top_matches(state, low, high)) return false;
  state.partial_value = value;
  state.partial_left = left;
  return true;
}

bool GrammarMatcher::accept(std::string_view bytes) {
  State next = state_;
  for (const char c : bytes)
    if (!advance(next, static_cast<uint8_t>(c))) return false;
  state_ = std::move(next);
  return true;
}

bool GrammarMatcher::is_accepting(const State& state) {
  return state.partial_left == 0 &&
         std::any_of(state.stacks.begin(), state.stacks.end(), [](const Stack& s) { return s.empty(); });
}

bool GrammarMatcher::can_continue(const State& state) const {
  return state.partial_left > 0 ||
         std::any_of(state.stacks.begin(), state.stacks.end(), [](const Stack& s) { return !s.empty(); });
}

}  // namespace tokenmill
