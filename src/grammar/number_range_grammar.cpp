// Numeric ranges as GBNF, digit by digit; see number_range_grammar.h.
#include "grammar/number_range_grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "grammar/gbnf_expression.h"

namespace tokenmill::gbnf {
namespace {

std::string digit_class(char first, char last) {
  if (first == last) return literal(std::string(1, first));
  return first == '0' && last == '9' ? "[0-9]" : fmt::format("[{}-{}]", first, last);
}

std::string any_digits(size_t n) { return repeat("[0-9]", static_cast<int64_t>(n), static_cast<int64_t>(n)); }

// Digit strings between `lo` and `hi` (same length, lo <= hi), as a group if it has alternatives.
std::string same_length_range(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "";
  size_t rest = lo.size() - 1;
  if (lo[0] == hi[0]) return seq({literal(lo.substr(0, 1)), same_length_range(lo.substr(1), hi.substr(1))});
  bool lo_open = lo.find_first_not_of('0', 1) == std::string::npos;  // lo = d00..0
  bool hi_open = hi.find_first_not_of('9', 1) == std::string::npos;  // hi = d99..9
  std::vector<std::string> alternatives;
  if (!lo_open)
    alternatives.push_back(
        seq({literal(lo.substr(0, 1)), same_length_range(lo.substr(1), std::string(rest, '9'))}));
  char first = lo_open ? lo[0] : static_cast<char>(lo[0] + 1);
  char last = hi_open ? hi[0] : static_cast<char>(hi[0] - 1);
  if (first <= last) alternatives.push_back(seq({digit_class(first, last), any_digits(rest)}));
  if (!hi_open)
    alternatives.push_back(
        seq({literal(hi.substr(0, 1)), same_length_range(std::string(rest, '0'), hi.substr(1))}));
  return alternatives.size() == 1 ? alternatives[0] : "( " + alternation(alternatives) + " )";
}

int64_t power_of_ten(size_t n) {
  int64_t p = 1;
  while (n-- > 0) p *= 10;
  return p;
}

// Unsigned numbers from `lo` to `hi` (none: unbounded), "" if there are none; non-integers
// have no exponent part.
std::string magnitude(Bound lo, std::optional<Bound> hi, bool integer) {
  int64_t first = lo.value + (lo.exclusive ? 1 : 0);  // whole parts any fraction may follow
  int64_t last =
      std::min(!hi ? kMaxMagnitude : hi->value - (integer && !hi->exclusive ? 0 : 1), kMaxMagnitude);
  std::vector<std::string> alternatives;
  if (first <= last) {
    std::string whole = nonnegative_range(first, last);
    if (integer) return whole;
    alternatives.push_back(seq({atom(whole), R"(( "." [0-9]{1,16} )?)"}));
  }
  if (integer) return "";
  if (lo.exclusive && (!hi || lo.value < hi->value) && lo.value <= kMaxMagnitude)
    alternatives.push_back(seq({literal(std::to_string(lo.value)), R"("." "0"{0,15} [1-9] [0-9]{0,15})"}));
  if (hi && !hi->exclusive && hi->value <= kMaxMagnitude &&
      (hi->value > lo.value || (hi->value == lo.value && !lo.exclusive)))
    alternatives.push_back(seq({literal(std::to_string(hi->value)), R"(( "." "0"{1,16} )?)"}));
  return alternation(alternatives);
}

}  // namespace

std::string nonnegative_range(int64_t lo, int64_t hi) {
  std::vector<std::string> alternatives;
  size_t full_from = 0, full_to = 0;  // a run of whole digit counts not yet written
  auto flush = [&] {
    if (full_from != 0)
      alternatives.push_back(seq({"[1-9]", repeat("[0-9]", static_cast<int64_t>(full_from - 1),
                                                  static_cast<int64_t>(full_to - 1))}));
    full_from = 0;
  };
  for (size_t digits = std::to_string(lo).size(); digits <= std::to_string(hi).size(); ++digits) {
    int64_t low = digits == 1 ? 0 : power_of_ten(digits - 1), high = power_of_ten(digits) - 1;
    int64_t a = std::max(lo, low), b = std::min(hi, high);
    if ((digits > 1 && a == low && b == high) || (digits == 1 && a == 1 && b == 9)) {
      if (full_from == 0) full_from = digits;
      full_to = digits;
      continue;
    }
    flush();
    alternatives.push_back(same_length_range(std::to_string(a), std::to_string(b)));
  }
  flush();
  return alternation(alternatives);
}

std::string number_range(std::optional<Bound> lo, std::optional<Bound> hi, bool integer) {
  // Values >= 0 by magnitude: from max(lo, 0) to hi; negative ones: from max(-hi, 0) (never 0
  // itself for integers) to -lo.
  std::vector<std::string> alternatives;
  if (!hi || hi->value > 0 || (hi->value == 0 && !hi->exclusive)) {
    std::string positive = magnitude(lo && lo->value >= 0 ? *lo : Bound{0, false}, hi, integer);
    if (!positive.empty()) alternatives.push_back(positive);
  }
  if (!lo || lo->value < 0) {
    Bound from = hi && hi->value <= 0 ? Bound{-hi->value, hi->exclusive} : Bound{0, integer};
    std::optional<Bound> to;
    if (lo) to.emplace(Bound{-lo->value, lo->exclusive});
    std::string negative = magnitude(from, to, integer);
    if (!negative.empty()) alternatives.push_back(seq({R"("-")", atom(negative)}));
  }
  return alternation(alternatives);
}

}  // namespace tokenmill::gbnf
