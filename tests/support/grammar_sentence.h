// Test helpers for grammars: compile GBNF text, and ask whether a text is a whole sentence.
#pragma once

#include <memory>
#include <string>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"

namespace tokenmill::testing {

inline std::shared_ptr<const Grammar> compile(const std::string& gbnf, const std::string& root = "root") {
  return std::make_shared<const Grammar>(Grammar::parse_gbnf(gbnf, root));
}

// Whether `text` is a whole sentence of `grammar`.
inline bool sentence(const std::shared_ptr<const Grammar>& grammar, const std::string& text) {
  GrammarMatcher matcher(grammar);
  return matcher.accept(text) && matcher.accepting();
}

}  // namespace tokenmill::testing
