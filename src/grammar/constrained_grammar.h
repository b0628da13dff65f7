// ConstrainedGrammar: one grammar over one vocabulary, as the sampler uses it: where a
// request's output starts, and which tokens may come next from any point. The allowed tokens
// depend only on the matcher's state, and a structured output passes through the same few
// states again and again (inside a string, between two properties), so each state's mask is
// computed once and cached (thread-safe; the cache is dropped whole when it grows past
// kMaxCachedStates). GrammarCache compiles each grammar text once per server.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar/grammar_vocabulary.h"

namespace tokenmill {

class ConstrainedGrammar {
 public:
  static constexpr size_t kMaxCachedStates = 1024;
  using Mask = TokenMask;

  ConstrainedGrammar(Grammar grammar, std::shared_ptr<const GrammarVocabulary> vocabulary);

  GrammarMatcher start() const { return GrammarMatcher(grammar_); }
  // The tokens whose bytes may follow `matcher`'s text.
  std::shared_ptr<const Mask> allowed_tokens(const GrammarMatcher& matcher) const;
  const GrammarVocabulary& vocabulary() const { return *vocabulary_; }

 private:
  struct StateHash {
    size_t operator()(const GrammarMatcher::State& state) const;
  };

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const GrammarVocabulary> vocabulary_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<GrammarMatcher::State, std::shared_ptr<const Mask>, StateHash> masks_;
};

class GrammarCache {
 public:
  static constexpr size_t kMaxGrammars = 16;

  explicit GrammarCache(const Tokenizer& tokenizer);

  // `gbnf` compiled for this vocabulary from rule `root` (once; Error naming the problem for
  // a bad grammar).
  std::shared_ptr<const ConstrainedGrammar> get(const std::string& gbnf, const std::string& root = "root");

 private:
  std::shared_ptr<const GrammarVocabulary> vocabulary_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const ConstrainedGrammar>> grammars_;
};

}  // namespace tokenmill
