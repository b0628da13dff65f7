#include "cost/price_model.h"

#include "core/error.h"
#include "cost/input_checks.h"

namespace tokenmill {

double hourly_cost(const CloudPrice& cloud) { return cloud.price_per_gpu_hour * cloud.gpus; }

OwnedHourly hourly_cost(const OwnedMachine& owned) {
  const double useful_hours_per_year = kHoursPerYear * owned.utilisation;
  return {.amortisation = owned.purchase_price / (owned.amortisation_years * useful_hours_per_year),
          .energy = owned.power_watts / 1000.0 * owned.kwh_price,
          .other = owned.other_per_year / useful_hours_per_year};
}

void validate(const CloudPrice& cloud) {
  require_non_negative(cloud.price_per_gpu_hour, "--gpu-hour-price");
  if (cloud.gpus < 1) fail("--gpus {}: must be at least 1", cloud.gpus);
}

void validate(const OwnedMachine& owned) {
  require_non_negative(owned.purchase_price, "--purchase-price");
  require_positive(owned.amortisation_years, "--years");
  require_non_negative(owned.power_watts, "--power-watts");
  require_non_negative(owned.kwh_price, "--kwh-price");
  require_in_range(owned.utilisation, 0.0, 1.0, "--utilisation");
  require_non_negative(owned.other_per_year, "--other-per-year");
}

}  // namespace tokenmill
