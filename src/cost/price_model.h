// What an hour of GPU work costs, rented (cloud) or owned. Money is in one currency, whatever
// label the user gives it; nothing is ever converted.
#pragma once

namespace tokenmill {

// Wall-clock hours in a 365-day year. A month is a twelfth of a year (730 h, 30.42 days).
inline constexpr double kHoursPerYear = 365.0 * 24.0;

// Renting: cloud_hourly = price_per_gpu_hour x gpus.
struct CloudPrice {
  double price_per_gpu_hour = 0;
  int gpus = 1;
};

// Owning a machine bought outright and written off linearly over `amortisation_years` of
// wall-clock time, whether it works or not.
struct OwnedMachine {
  double purchase_price = 0;      // the whole machine
  double amortisation_years = 3;  // > 0
  double power_watts = 0;         // drawn while working; idle draw is not counted
  double kwh_price = 0;           // electricity, per kWh
  double utilisation = 1;         // fraction of the amortisation period doing useful work, (0, 1]
  double other_per_year = 0;      // space, cooling, support contracts...: per year
};

// The cost of one useful hour on an owned machine, by part:
//   amortisation = purchase_price / (amortisation_years x 8760 h x utilisation)
//   energy       = power_watts / 1000 x kwh_price
//   other        = other_per_year / (8760 h x utilisation)
struct OwnedHourly {
  double amortisation = 0;
  double energy = 0;
  double other = 0;
  double total() const { return amortisation + energy + other; }
};

double hourly_cost(const CloudPrice& cloud);
OwnedHourly hourly_cost(const OwnedMachine& owned);

// Throw Error naming the `tokenmill cost` flag of the first invalid field: negative or
// non-finite prices, power or yearly costs, gpus < 1, years <= 0, utilisation outside (0, 1].
void validate(const CloudPrice& cloud);
void validate(const OwnedMachine& owned);

}  // namespace tokenmill
