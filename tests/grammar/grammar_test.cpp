// GBNF grammars (grammar/grammar.h) and matching bytes against them (grammar_matcher.h):
// whole sentences accepted, near misses refused at the first byte that cannot go on, UTF-8
// characters split across pieces, repetitions with bounds, and grammars refused at parse time.
#include "grammar/grammar.h"

#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "grammar/grammar_matcher.h"
#include "support/grammar_sentence.h"

namespace tokenmill {
namespace {

using testing::compile;
using testing::sentence;

TEST(Grammar, AcceptsItsSentencesAndRefusesOthers) {
  const auto g = compile(R"(
root   ::= "{" ws "\"answer\":" ws answer ws "}"   # a comment
answer ::= "yes" | "no" | [0-9]+ ( "." [0-9]{1,3} )?
ws     ::= [ \t\n]{0,2}
)");
  for (const char* ok :
       {R"({"answer":yes})", R"({ "answer": no })", R"({"answer":12.5})", R"({"answer":0.125})"})
    EXPECT_TRUE(sentence(g, ok)) << ok;
  for (const char* bad : {R"({"answer":maybe})", R"({"answer":1.2345})", R"({"answer":12.})",
                          R"({   "answer":1})", R"({"answer":yes)", R"({"answer":yes}})", ""})
    EXPECT_FALSE(sentence(g, bad)) << bad;
}

TEST(Grammar, RefusesAtTheFirstImpossibleByteAndKeepsItsState) {
  GrammarMatcher m(compile(R"(root ::= "ab" [c-e]* "!")"));
  EXPECT_TRUE(m.accept("ab"));
  EXPECT_FALSE(m.accept("cx"));  // 'c' fits, 'x' does not: nothing taken
  EXPECT_TRUE(m.accept("cde"));
  EXPECT_FALSE(m.accepting());
  EXPECT_TRUE(m.can_continue());
  EXPECT_TRUE(m.accept("!"));
  EXPECT_TRUE(m.accepting());
  EXPECT_FALSE(m.can_continue());
  EXPECT_FALSE(m.accept("!"));
}

TEST(Grammar, MatchesCodePointsAcrossSplitUtf8) {
  const auto g = compile(R"(root ::= [à-ÿ] "€" [^a-z]+)");
  GrammarMatcher m(g);
  const std::string text = "é€ßZ";  // é: C3 A9, €: E2 82 AC
  for (const char byte : text) ASSERT_TRUE(m.accept(std::string(1, byte)));
  EXPECT_TRUE(m.accepting());
  GrammarMatcher partial(g);
  EXPECT_TRUE(partial.accept("\xC3"));
  EXPECT_FALSE(partial.accepting());                   // half a character is not a sentence
  EXPECT_FALSE(partial.accept("\x41"));                // not a continuation byte
  EXPECT_FALSE(GrammarMatcher(g).accept("\xC2"));      // C2 leads U+0080..U+00BF: none in [à-ÿ]
  EXPECT_FALSE(GrammarMatcher(g).accept("\xE0\x80"));  // overlong
  EXPECT_FALSE(sentence(compile(R"(root ::= .)"), "\xED\xA0\x80"));     // a surrogate
  EXPECT_TRUE(sentence(compile(R"(root ::= .)"), "\xF0\x9F\x98\x80"));  // U+1F600
}

TEST(Grammar, RepetitionBounds) {
  const auto g = compile(R"(root ::= "a"{2,4} "b"{3} "c"{1,} "d"?)");
  EXPECT_TRUE(sentence(g, "aabbbc"));
  EXPECT_TRUE(sentence(g, "aaaabbbcccd"));
  EXPECT_FALSE(sentence(g, "abbbc"));
  EXPECT_FALSE(sentence(g, "aaaaabbbc"));
  EXPECT_FALSE(sentence(g, "aabbc"));
  EXPECT_FALSE(sentence(g, "aabbb"));
  const auto literal = compile(R"(root ::= ("ab" | "c")* "ab"*)");
  EXPECT_TRUE(sentence(literal, ""));
  EXPECT_TRUE(sentence(literal, "abcabab"));
  EXPECT_FALSE(sentence(literal, "aab"));
}

TEST(Grammar, RecursiveRulesNestWithoutBound) {
  const auto g = compile(R"(
root ::= list
list ::= "[" ( item ( "," item )* )? "]"
item ::= [0-9] | list
)");
  EXPECT_TRUE(sentence(g, "[]"));
  EXPECT_TRUE(sentence(g, "[1,[2,[[]]],3]"));
  EXPECT_TRUE(sentence(g, std::string(200, '[') + std::string(200, ']')));
  EXPECT_FALSE(sentence(g, "[1,]"));
  EXPECT_FALSE(sentence(g, "[[1]"));
}

TEST(Grammar, BoundsWhatAGrammarMayCost) {
  // Each "x" doubles the pending "a"/"b" endings: 2^n parse stacks, refused past kMaxStacks.
  GrammarMatcher m(compile(R"(root ::= ("x" root "a" | "x" root "b")?)"));
  size_t taken = 0;
  while (taken < 20 && m.accept("x")) ++taken;
  EXPECT_GE(taken, 5u);
  EXPECT_LT(taken, 20u);  // refused once the stacks would pass kMaxStacks
  EXPECT_LE(m.state().stacks.size(), GrammarMatcher::kMaxStacks);
  EXPECT_TRUE(m.accept("abab"));
  // Repetitions written out, nesting and left-corner chains are bounded before they are built.
  const auto refused = [](const std::string& text, const char* message) {
    try {
      Grammar::parse_gbnf(text);
      ADD_FAILURE() << "accepted: " << text.substr(0, 60);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  refused(fmt::format("root ::= \"{}\"{{1000}}", std::string(1000, 'a')), "too large");
  refused("root ::= \"abcdefghijklmnopqrstuvwxyz\"{9000}", "too large");
  EXPECT_NO_THROW(
      Grammar::parse_gbnf("root ::= ((\"ab\"{10000}){10000}){10000}"));  // groups are shared rules
  refused(fmt::format("root ::= {}\"a\"{}", std::string(100, '('), std::string(100, ')')),
          "nest more than 64");
  std::string chain = "root ::= r0\n";
  for (int i = 0; i < 1200; ++i) chain += fmt::format("r{} ::= r{}\n", i, i + 1);
  chain += "r1200 ::= \"a\"";
  refused(chain, "more than 1000 deep");
  EXPECT_NO_THROW(Grammar::parse_gbnf("root ::= [a-z]{0,10000} \"x\"{5000}"));
}

TEST(Grammar, RefusesBadGrammarsNamingTheProblem) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"root ::= undefined", "'undefined' is used but never defined"},
      {"root ::= root \"a\" | \"b\"", "left recursion"},
      {"root ::= a\na ::= \"x\"?\nb ::= a*", ""},  // fine: b is unused, a* of a nullable a is refused below
      {"root ::= (\"x\"?)*", "left recursion"},
      {"root ::= \"a", "unterminated string"},
      {"root ::= [a-", "unterminated character class"},
      {"root ::= [z-a]", "backwards"},
      {"root ::= \"a\"{3,2}", "below its minimum"},
      {"root ::= \"a\"{20000}", "over 10000"},
      {"root ::= \"\\q\"", "unknown escape"},
      {"root = \"a\"", "'::='"},
      {"start ::= \"a\"", "no rule 'root'"},
      {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
      {"root ::= \"a\" )", "unexpected ')'"},
  };
  for (const auto& [text, message] : cases) {
    SCOPED_TRACE(text);
    if (message.empty()) {
      EXPECT_THROW(Grammar::parse_gbnf(text), Error);  // b ::= a* repeats a nullable rule
      continue;
    }
    try {
      Grammar::parse_gbnf(text);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tokenmill
