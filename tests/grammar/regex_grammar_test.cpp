// JSON Schema `pattern` -> GBNF (grammar/regex_grammar.h): anchors, searches at unanchored
// ends, JSON encoding of literal characters and classes, and refusals naming pointer and offset.
#include "grammar/regex_grammar.h"

#include <string>

#include <gtest/gtest.h>

#include "core/error.h"

namespace tokenmill::gbnf {
namespace {

std::string gbnf(const std::string& pattern) { return pattern_to_gbnf(pattern, "#/pattern", "char"); }

TEST(RegexGrammar, AnchorsAndUnanchoredEnds) {
  EXPECT_EQ(gbnf(R"(^[a-z]+\d{2,4}$)"), "[a-z]+ [0-9]{2,4}");
  EXPECT_EQ(gbnf("ab|c(d|e)*f?"), R"(( char* "ab" char* | char* "c" ( "d" | "e" )* "f"? char* ))");
}

TEST(RegexGrammar, CharactersAreWrittenJsonEncoded) {
  EXPECT_EQ(gbnf("^a\"\\\\\xC3\xA9\\t$"), R"("a\\\"\\\\)"
                                          "\xC3\xA9"
                                          R"(\\t")");
  EXPECT_EQ(gbnf(R"(^[^"]$)"), R"(( [^\x00-\x1F"\\] | "\\\\" | "\\t" | "\\n" | "\\r" | "\\f" | "\\b" ))");
}

TEST(RegexGrammar, RefusesUnsupportedSyntaxNamingWhereAndOffset) {
  try {
    pattern_to_gbnf("(?=a)", "#/properties/x/pattern", "char");
    FAIL() << "a lookahead was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(
        std::string(e.what()).rfind("#/properties/x/pattern: a lookaround or named group at offset 2", 0), 0u)
        << e.what();
  }
  EXPECT_THROW(gbnf(R"(a\1)"), Error);
  EXPECT_THROW(gbnf("a{3,2}"), Error);
  EXPECT_THROW(gbnf("a^b"), Error);
}

}  // namespace
}  // namespace tokenmill::gbnf
