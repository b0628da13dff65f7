// Numeric ranges as GBNF, digit by digit: what the JSON Schema keywords minimum, maximum,
// exclusiveMinimum and exclusiveMaximum become once the bounds are integers.
//
// The texts are JSON numbers in the forms the shared `integer` and `number` rules of
// json_schema_grammar.h allow: no leading zeros, no "-0", at most 16 integer digits, a fraction
// of at most 16 digits and, inside a bounded range, no exponent part.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tokenmill::gbnf {

inline constexpr int64_t kMaxMagnitude = 9'999'999'999'999'999;  // 16 digits: the integer rule's limit

// One end of a range.
struct Bound {
  int64_t value = 0;
  bool exclusive = false;
};

// The non-negative integers in [lo, hi] (0 <= lo <= hi), without leading zeros. Digit counts
// whose whole range is included share one `[1-9] [0-9]{a,b}` alternative.
std::string nonnegative_range(int64_t lo, int64_t hi);

// The integers (when `integer`) or numbers between `lo` and `hi` (nullopt: unbounded on that
// side), as alternatives without a surrounding group; "" when the range holds none of them.
// Bound values must lie within +-(kMaxMagnitude + 1); a value just outside the 16-digit range
// means no limit but the digit count.
std::string number_range(std::optional<Bound> lo, std::optional<Bound> hi, bool integer);

}  // namespace tokenmill::gbnf
