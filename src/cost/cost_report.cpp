#include "cost/cost_report.h"

#include "core/error.h"
#include "cost/input_checks.h"

namespace tokenmill {

namespace {

constexpr double kSecondsPerHour = 3600.0;

void validate(const CostInputs& in) {
  if (!in.cloud && !in.owned)
    fail(
        "nothing to price: give --preset NAME, or --gpu-hour-price, or --purchase-price with "
        "--power-watts and --kwh-price");
  if (in.cloud) validate(*in.cloud);
  if (in.owned) validate(*in.owned);
  require_in_range(in.hours_per_day, 0.0, 24.0, "--hours-per-day");
  for (const Throughput& t : in.throughputs) require_positive(t.tokens_per_s, t.source);
  if (in.job_hours && in.job_tokens) fail("--job-hours and --job-tokens: give one of them, not both");
  if (in.job_hours) require_positive(*in.job_hours, "--job-hours");
  if (in.job_tokens) {
    require_positive(*in.job_tokens, "--job-tokens");
    if (in.throughputs.empty()) fail("--job-tokens needs a throughput: give --tokens-per-s or --bench");
  }
}

JobCost job_cost(const CostReport& r, double hours) {
  JobCost job;
  job.hours = hours;
  if (r.cloud_hourly) job.cloud = *r.cloud_hourly * hours;
  if (r.owned_hourly)
    job.owned = OwnedHourly{.amortisation = r.owned_hourly->amortisation * hours,
                            .energy = r.owned_hourly->energy * hours,
                            .other = r.owned_hourly->other * hours};
  return job;
}

}  // namespace

double cost_per_million_tokens(double hourly_cost, double tokens_per_s) {
  return hourly_cost / (tokens_per_s * kSecondsPerHour) * 1e6;
}

double hours_per_month(double hours_per_day) { return hours_per_day * 365.0 / 12.0; }

std::optional<double> break_even_months(const CloudPrice& cloud, const OwnedMachine& owned,
                                        double hours_per_day) {
  const double monthly_saving =
      (hourly_cost(cloud) - hourly_cost(owned).energy) * hours_per_month(hours_per_day) -
      owned.other_per_year / 12.0;
  if (monthly_saving <= 0) return std::nullopt;
  return owned.purchase_price / monthly_saving;
}

CostReport compute_cost(const CostInputs& inputs) {
  validate(inputs);
  CostReport r;
  r.inputs = inputs;
  if (inputs.cloud) r.cloud_hourly = hourly_cost(*inputs.cloud);
  if (inputs.owned) r.owned_hourly = hourly_cost(*inputs.owned);
  for (const Throughput& t : inputs.throughputs) {
    PhaseCost phase;
    phase.throughput = t;
    if (r.cloud_hourly) phase.cloud_per_million = cost_per_million_tokens(*r.cloud_hourly, t.tokens_per_s);
    if (r.owned_hourly)
      phase.owned_per_million = cost_per_million_tokens(r.owned_hourly->total(), t.tokens_per_s);
    r.phases.push_back(phase);
  }
  if (inputs.job_hours) r.job = job_cost(r, *inputs.job_hours);
  if (inputs.job_tokens) {
    r.job = job_cost(r, *inputs.job_tokens / (inputs.throughputs.front().tokens_per_s * kSecondsPerHour));
    r.job->tokens = inputs.job_tokens;
  }
  if (inputs.cloud && inputs.owned) {
    const auto months = break_even_months(*inputs.cloud, *inputs.owned, inputs.hours_per_day);
    r.break_even =
        BreakEven{.hours_per_month = hours_per_month(inputs.hours_per_day),
                  .months = months,
                  .within_amortisation = months && *months <= inputs.owned->amortisation_years * 12.0};
  }
  return r;
}

}  // namespace tokenmill
