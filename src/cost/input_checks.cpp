#include "cost/input_checks.h"

#include <cmath>

#include "core/error.h"

namespace tokenmill {

void require_non_negative(double value, std::string_view flag) {
  if (!std::isfinite(value) || value < 0)
    fail("{} {}: must be a finite number >= 0; pass a non-negative value", flag, value);
}

void require_positive(double value, std::string_view flag) {
  if (!std::isfinite(value) || value <= 0)
    fail("{} {}: must be a finite number > 0; pass a positive value", flag, value);
}

void require_in_range(double value, double low_exclusive, double high_inclusive, std::string_view flag) {
  if (!std::isfinite(value) || value <= low_exclusive || value > high_inclusive)
    fail("{} {}: must be in ({}, {}]; pass a value in that range", flag, value, low_exclusive,
         high_inclusive);
}

}  // namespace tokenmill
