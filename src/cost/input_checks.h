// Checks of the numbers a user gives `tokenmill cost`. Each throws Error naming `flag` (the
// command-line flag the value came from) and saying what a valid value is.
#pragma once

#include <string_view>

namespace tokenmill {

// Finite and >= 0 (prices, power, yearly costs).
void require_non_negative(double value, std::string_view flag);
// Finite and > 0 (throughput, years, job size).
void require_positive(double value, std::string_view flag);
// Finite, > low and <= high: utilisation in (0, 1], hours per day in (0, 24].
void require_in_range(double value, double low_exclusive, double high_inclusive, std::string_view flag);

}  // namespace tokenmill
