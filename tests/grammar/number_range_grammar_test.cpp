// Numeric ranges as GBNF (grammar/number_range_grammar.h): whole digit counts share one
// alternative, partial ones split digit by digit, negatives get a "-" prefix, empty ranges give "".
#include "grammar/number_range_grammar.h"

#include <optional>

#include <gtest/gtest.h>

namespace tokenmill::gbnf {
namespace {

TEST(NumberRangeGrammar, NonnegativeRangesDigitByDigit) {
  EXPECT_EQ(nonnegative_range(7, 7), R"("7")");
  EXPECT_EQ(nonnegative_range(0, 9), "[0-9]");
  EXPECT_EQ(nonnegative_range(0, 99999), "[0-9] | [1-9] [0-9]{1,4}");
  EXPECT_EQ(
      nonnegative_range(123, 98765),
      R"(( "1" ( "2" [3-9] | [3-9] [0-9] ) | [2-9] [0-9]{2} ) | [1-9] [0-9]{3} | )"
      R"(( [1-8] [0-9]{4} | "9" ( [0-7] [0-9]{3} | "8" ( [0-6] [0-9]{2} | "7" ( [0-5] [0-9] | "6" [0-5] ) ) ) ))");
}

TEST(NumberRangeGrammar, SignedIntegerAndNumberRanges) {
  EXPECT_EQ(number_range(Bound{-37, false}, Bound{1234, false}, true),
            R"([0-9] | [1-9] [0-9]{1,2} | "1" ( [0-1] [0-9]{2} | "2" ( [0-2] [0-9] | "3" [0-4] ) ) | )"
            R"("-" ( [1-9] | ( [1-2] [0-9] | "3" [0-7] ) ))");
  EXPECT_EQ(number_range(std::nullopt, Bound{-3, false}, true), R"("-" ( [3-9] | [1-9] [0-9]{1,15} ))");
  EXPECT_EQ(number_range(Bound{0, true}, Bound{10, true}, false),
            R"([1-9] ( "." [0-9]{1,16} )? | "0" "." "0"{0,15} [1-9] [0-9]{0,15})");
  EXPECT_EQ(number_range(Bound{5, false}, Bound{3, false}, true), "");
}

}  // namespace
}  // namespace tokenmill::gbnf
