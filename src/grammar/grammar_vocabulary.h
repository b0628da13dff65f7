// GrammarVocabulary: a tokenizer's tokens as a byte trie, to find which tokens a grammar
// allows next. Tokens sharing a prefix share its walk: from each parse stack of a matcher
// state the trie is walked depth first, each edge advancing the stack in place by one byte
// (GrammarMatcher::step, no allocation), and a branch is left at the first byte the grammar
// refuses, so most of the vocabulary is dismissed at its first byte. A state allows the
// tokens any of its stacks allows. Special (control) tokens and tokens with no bytes are never allowed: they
// are not text (the end of generation is decided apart, see ConstrainedGrammar).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/grammar_matcher.h"
#include "tokenizer/tokenizer.h"

namespace tokenmill {

// A set of token ids, a bit each (a vocabulary of 152k tokens is 19 KB).
class TokenMask {
 public:
  // Empty, for ids [0, size).
  void reset(size_t size) {
    size_ = size;
    words_.assign((size + 63) / 64, 0);
  }
  void set(size_t id) { words_[id / 64] |= uint64_t{1} << (id % 64); }
  bool test(size_t id) const { return id < size_ && ((words_[id / 64] >> (id % 64)) & 1) != 0; }
  size_t size() const { return size_; }
  size_t count() const;

 private:
  size_t size_ = 0;
  std::vector<uint64_t> words_;
};

class GrammarVocabulary {
 public:
  explicit GrammarVocabulary(const Tokenizer& tokenizer);

  size_t size() const { return bytes_.size(); }
  const std::string& bytes(int32_t id) const { return bytes_.at(static_cast<size_t>(id)); }

  // `mask`: every token whose whole bytes `matcher` can take from `state`.
  void allowed(const GrammarMatcher& matcher, const GrammarMatcher::State& state, TokenMask& mask) const;

 private:
  // The trie in depth-first order, so that a walk reads memory forwards: a node's first
  // child is the next node, its next sibling starts at `end`, where its subtree ends.
  struct Node {
    uint32_t end = 0;          // one past the last node of its subtree
    uint32_t first_token = 0;  // its tokens: tokens_[first_token, first_token + token_count)
    uint32_t token_count = 0;  // tokens whose bytes end here
    uint8_t byte = 0;          // the byte on the edge from its parent
  };
  void walk(uint32_t node, const GrammarMatcher& matcher, GrammarMatcher::Stack& stack,
            const GrammarMatcher::Partial& partial, TokenMask& mask) const;

  std::vector<std::string> bytes_;  // per id; "" for tokens never allowed
  std::vector<Node> nodes_;         // nodes_[0] is the root
  std::vector<int32_t> tokens_;
};

}  // namespace tokenmill
