#include "grammar/grammar_matcher.h"

#include <algorithm>
#include <utility>

namespace tokenmill {

namespace {

void sort_unique(std::vector<GrammarMatcher::Stack>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  for (const uint32_t start : grammar_->alternatives(grammar_->root())) {
    Stack stack{start};
    expand(stack, [&](Stack& s) { state_.stacks.push_back(s); });
  }
  sort_unique(state_.stacks);
}

bool GrammarMatcher::advance(State& state, uint8_t byte) const {
  std::vector<Stack> next;
  Partial partial;
  for (Stack stack : state.stacks) {
    step(stack, state.partial, byte, [&](Stack& s, const Partial& p) {
      next.push_back(s);
      partial = p;  // the same for every stack: it depends on the bytes only
    });
  }
  if (next.empty()) return false;
  sort_unique(next);
  if (next.size() > kMaxStacks) return false;
  state.stacks = std::move(next);
  state.partial = partial;
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
  return state.partial.left == 0 &&
         std::any_of(state.stacks.begin(), state.stacks.end(), [](const Stack& s) { return s.empty(); });
}

bool GrammarMatcher::can_continue(const State& state) {
  return state.partial.left > 0 ||
         std::any_of(state.stacks.begin(), state.stacks.end(), [](const Stack& s) { return !s.empty(); });
}

}  // namespace tokenmill
