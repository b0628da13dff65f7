// The cost of tokens and of a job under a cloud and an owned price model, and the break-even
// between them (hourly costs: cost/price_model.h):
//   cost_per_million_tokens = hourly_cost / (tokens_per_s x 3600 s/h) x 1e6
//   job_hours               = the hours given, or job_tokens / (tokens_per_s x 3600 s/h)
//   job cost                = hourly_cost x job_hours (owned: each part, per useful hour)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cost/gpu_presets.h"
#include "cost/price_model.h"
#include "cost/throughput.h"

namespace tokenmill {

struct CostInputs {
  std::string currency = "$";
  std::string title;                  // what is priced (the worked example); may be empty
  const GpuPreset* preset = nullptr;  // the preset defaults came from, if any
  std::optional<CloudPrice> cloud;    // a side left empty is not priced
  std::optional<OwnedMachine> owned;
  double hours_per_day = 24;  // hours of use per day, (0, 24]: the break-even's pace
  std::vector<Throughput> throughputs;
  std::optional<double> job_hours;
  std::optional<double> job_tokens;  // run at throughputs.front()
  std::vector<std::string> notes;    // said along with the result
};

struct PhaseCost {
  Throughput throughput;
  std::optional<double> cloud_per_million;  // per million tokens
  std::optional<double> owned_per_million;
};

struct JobCost {
  double hours = 0;
  std::optional<double> tokens;      // when the job was given in tokens
  std::optional<double> cloud;       // cloud_hourly x hours
  std::optional<OwnedHourly> owned;  // each part of the owned hourly cost x hours
};

struct BreakEven {
  double hours_per_month = 0;        // hours_per_month(hours_per_day)
  std::optional<double> months;      // nullopt: never
  bool within_amortisation = false;  // months <= amortisation_years x 12
};

struct CostReport {
  CostInputs inputs;
  std::optional<double> cloud_hourly;
  std::optional<OwnedHourly> owned_hourly;  // per useful hour
  std::vector<PhaseCost> phases;
  std::optional<JobCost> job;
  std::optional<BreakEven> break_even;  // when both sides are priced
};

double cost_per_million_tokens(double hourly_cost, double tokens_per_s);
// hours_per_month = hours_per_day x 365 / 12
double hours_per_month(double hours_per_day);

// The months of use at `hours_per_day` after which owning has cost less than renting. The
// purchase is paid up front; from then on each month costs
//   hours_per_month = hours_per_day x 365 / 12
//   owning:  purchase_price + (energy_hourly x hours_per_month + other_per_year / 12) x months
//   renting: cloud_hourly x hours_per_month x months
// so they are equal at
//   months = purchase_price / ((cloud_hourly - energy_hourly) x hours_per_month - other_per_year / 12)
// and owning never catches up (nullopt) when that denominator is <= 0, i.e. when the owned
// running cost per month is at least the rent.
std::optional<double> break_even_months(const CloudPrice& cloud, const OwnedMachine& owned,
                                        double hours_per_day);

// Validates the inputs (Error naming the flag) and computes every figure they allow.
CostReport compute_cost(const CostInputs& inputs);

}  // namespace tokenmill
