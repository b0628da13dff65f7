#include "grammar/grammar_vocabulary.h"

#include <algorithm>
#include <bit>
#include <string_view>
#include <utility>

namespace tokenmill {

size_t TokenMask::count() const {
  size_t n = 0;
  for (const uint64_t w : words_) n += static_cast<size_t>(std::popcount(w));
  return n;
}

GrammarVocabulary::GrammarVocabulary(const Tokenizer& tokenizer)
    : bytes_(static_cast<size_t>(tokenizer.vocab_size())) {
  std::vector<std::pair<std::string_view, int32_t>> sorted;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.is_special(id)) continue;
    std::string& bytes = bytes_[static_cast<size_t>(id)] = tokenizer.token_bytes(id);
    if (!bytes.empty()) sorted.emplace_back(bytes, id);
  }
  std::sort(sorted.begin(), sorted.end());
  // In sorted order each token shares with the previous one a prefix whose nodes exist; the
  // rest of its bytes are new nodes, appended: that is depth-first order.
  nodes_.emplace_back();
  std::vector<uint32_t> path{0};  // path[d]: the node of the current token's first d bytes
  std::string_view previous;
  const auto close_to = [&](size_t depth) {
    for (; path.size() > depth + 1; path.pop_back())
      nodes_[path.back()].end = static_cast<uint32_t>(nodes_.size());
  };
  for (const auto& [bytes, id] : sorted) {
    const size_t shared = static_cast<size_t>(
        std::mismatch(previous.begin(), previous.end(), bytes.begin(), bytes.end()).first - previous.begin());
    close_to(shared);
    for (size_t d = shared; d < bytes.size(); ++d) {
      path.push_back(static_cast<uint32_t>(nodes_.size()));
      nodes_.push_back(Node{.byte = static_cast<uint8_t>(bytes[d])});
    }
    Node& node = nodes_[path.back()];
    if (node.token_count == 0) node.first_token = static_cast<uint32_t>(tokens_.size());
    ++node.token_count;  // tokens with the same bytes come one after another
    tokens_.push_back(id);
    previous = bytes;
  }
  close_to(0);
  nodes_[0].end = static_cast<uint32_t>(nodes_.size());
}

void GrammarVocabulary::walk(uint32_t node, const GrammarMatcher& matcher, GrammarMatcher::Stack& stack,
                             const GrammarMatcher::Partial& partial, TokenMask& mask) const {
  for (uint32_t child = node + 1; child < nodes_[node].end; child = nodes_[child].end) {
    const Node& c = nodes_[child];
    matcher.step(stack, partial, c.byte, [&](GrammarMatcher::Stack& next, const GrammarMatcher::Partial& p) {
      for (uint32_t t = c.first_token; t < c.first_token + c.token_count; ++t)
        mask.set(static_cast<size_t>(tokens_[t]));
      walk(child, matcher, next, p, mask);
    });
  }
}

void GrammarVocabulary::allowed(const GrammarMatcher& matcher, const GrammarMatcher::State& state,
                                TokenMask& mask) const {
  mask.reset(bytes_.size());
  for (GrammarMatcher::Stack stack : state.stacks) walk(0, matcher, stack, state.partial, mask);
}

}  // namespace tokenmill
