#include "grammar/constrained_grammar.h"

#include <functional>
#include <utility>

namespace tokenmill {

namespace {

void combine(size_t& seed, size_t value) {
  seed ^= value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2);
}

}  // namespace

size_t ConstrainedGrammar::StateHash::operator()(const GrammarMatcher::State& state) const {
  size_t seed = std::hash<uint32_t>{}(state.partial.value) ^ static_cast<size_t>(state.partial.left);
  for (const GrammarMatcher::Stack& stack : state.stacks) {
    combine(seed, stack.size());
    for (const uint32_t position : stack) combine(seed, position);
  }
  return seed;
}

ConstrainedGrammar::ConstrainedGrammar(Grammar grammar, std::shared_ptr<const GrammarVocabulary> vocabulary)
    : grammar_(std::make_shared<const Grammar>(std::move(grammar))), vocabulary_(std::move(vocabulary)) {}

std::shared_ptr<const ConstrainedGrammar::Mask> ConstrainedGrammar::allowed_tokens(
    const GrammarMatcher& matcher) const {
  {
    const std::lock_guard lock(mutex_);
    const auto found = masks_.find(matcher.state());
    if (found != masks_.end()) return found->second;
  }
  auto mask = std::make_shared<Mask>();
  vocabulary_->allowed(matcher, matcher.state(), *mask);
  const std::lock_guard lock(mutex_);
  if (masks_.size() >= kMaxCachedStates) masks_.clear();
  return masks_.emplace(matcher.state(), std::move(mask)).first->second;
}

GrammarCache::GrammarCache(const Tokenizer& tokenizer)
    : vocabulary_(std::make_shared<const GrammarVocabulary>(tokenizer)) {}

std::shared_ptr<const ConstrainedGrammar> GrammarCache::get(const std::string& gbnf,
                                                            const std::string& root) {
  const std::string key = root + '\n' + gbnf;
  {
    const std::lock_guard lock(mutex_);
    const auto found = grammars_.find(key);
    if (found != grammars_.end()) return found->second;
  }
  auto compiled = std::make_shared<const ConstrainedGrammar>(Grammar::parse_gbnf(gbnf, root), vocabulary_);
  const std::lock_guard lock(mutex_);
  if (grammars_.size() >= kMaxGrammars) grammars_.clear();
  return grammars_.emplace(key, std::move(compiled)).first->second;
}

}  // namespace tokenmill
