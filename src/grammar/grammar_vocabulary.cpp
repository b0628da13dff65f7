#include "grammar/grammar_vocabulary.h"

#include <algorithm>

namespace tokenmill {

GrammarVocabulary::GrammarVocabulary(const Tokenizer& tokenizer)
    : bytes_(static_cast<size_t>(tokenizer.vocab_size())), nodes_(1) {
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.is_special(id)) continue;
    std::string bytes = tokenizer.token_bytes(id);
    uint32_t node = 0;
    for (const char c : bytes) {
      const auto byte = static_cast<uint8_t>(c);
      auto& children = nodes_[node].children;
      const auto found =
          std::find_if(children.begin(), children.end(), [&](const auto& e) { return e.first == byte; });
      if (found != children.end()) {
        node = found->second;
        continue;
      }
      const auto child = static_cast<uint32_t>(nodes_.size());
      children.emplace_back(byte, child);
      nodes_.emplace_back();
      node = child;
    }
    if (node != 0) nodes_[node].tokens.push_back(id);
    bytes_[static_cast<size_t>(id)] = std::move(bytes);
  }
}

void GrammarVocabulary::walk(uint32_t node, const GrammarMatcher& matcher, const GrammarMatcher::State& state,
                             std::vector<uint8_t>& mask) const {
  for (const auto& [byte, child] : nodes_[node].children) {
    GrammarMatcher::State next = state;
    if (!matcher.advance(next, byte)) continue;
    for (const int32_t id : nodes_[child].tokens) mask[static_cast<size_t>(id)] = 1;
    walk(child, matcher, next, mask);
  }
}

void GrammarVocabulary::allowed(const GrammarMatcher& matcher, const GrammarMatcher::State& state,
                                std::vector<uint8_t>& mask) const {
  mask.assign(bytes_.size(), 0);
  walk(0, matcher, state, mask);
}

}  // namespace tokenmill
