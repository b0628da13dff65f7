// GrammarVocabulary: a tokenizer's tokens as a byte trie, to find which tokens a grammar
// allows next. Tokens sharing a prefix share its walk: from a matcher state the trie is
// walked depth first, each edge advancing a copy of the state by one byte, and a branch is
// left at the first byte the grammar refuses, so most of the vocabulary is dismissed at its
// first byte. Special (control) tokens and tokens with no bytes are never allowed: they are
// not text (the end of generation is decided apart, see ConstrainedGrammar).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/grammar_matcher.h"
#include "tokenizer/tokenizer.h"

namespace tokenmill {

class GrammarVocabulary {
 public:
  explicit GrammarVocabulary(const Tokenizer& tokenizer);

  size_t size() const { return bytes_.size(); }
  const std::string& bytes(int32_t id) const { return bytes_.at(static_cast<size_t>(id)); }

  // Sets mask[id] = 1 for every token whose whole bytes `matcher` can take from `state`;
  // `mask` is resized to size() and cleared first.
  void allowed(const GrammarMatcher& matcher, const GrammarMatcher::State& state,
               std::vector<uint8_t>& mask) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, uint32_t>> children;  // by byte
    std::vector<int32_t> tokens;                         // tokens whose bytes end here
  };
  void walk(uint32_t node, const GrammarMatcher& matcher, const GrammarMatcher::State& state,
            std::vector<uint8_t>& mask) const;

  std::vector<std::string> bytes_;  // per id; "" for tokens never allowed
  std::vector<Node> nodes_;         // nodes_[0] is the root
};

}  // namespace tokenmill
