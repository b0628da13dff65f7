#include "cost/cost_request.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "cost/bench_throughput.h"
#include "cost/input_checks.h"

namespace tokenmill {

namespace {

template <class T>
void take_default(std::optional<T>& field, const std::optional<T>& base) {
  if (!field) field = base;
}

// A preset's per-GPU figure for `gpus` GPUs, unless the user gave the whole-machine value.
std::optional<double> machine_value(const std::optional<double>& given, const GpuPreset* preset,
                                    SourcedValue GpuPreset::*field, int gpus) {
  if (given || preset == nullptr) return given;
  return (preset->*field).value * gpus;
}

void add_bench_throughputs(CostInputs& in, const std::string& path, const std::string& phase, int gpus) {
  BenchThroughputs bench = read_bench_throughputs(path, phase);
  const GpuPreset* match = match_gpu_preset(bench.device_name);
  if (match != nullptr && in.preset == nullptr)
    in.notes.push_back(fmt::format("{} was measured on '{}': that is the {} preset (--preset {})", path,
                                   bench.device_name, match->name, match->key));
  if (in.preset != nullptr && match != in.preset)
    in.notes.push_back(fmt::format("{} was measured on '{}', not on the {} preset's GPU", path,
                                   bench.device_name, in.preset->name));
  if (gpus > 1) {
    for (Throughput& t : bench.phases) t.tokens_per_s *= gpus;
    in.notes.push_back(fmt::format(
        "{} measured one device: its tokens/s are multiplied by --gpus {} (assumes linear scaling)", path,
        gpus));
  }
  for (Throughput& t : bench.phases) in.throughputs.push_back(std::move(t));
}

void add_owned(CostInputs& in, const CostRequest& r, int gpus) {
  const std::optional<double> purchase =
      machine_value(r.purchase_price, in.preset, &GpuPreset::purchase_price, gpus);
  const std::optional<double> power =
      machine_value(r.power_watts, in.preset, &GpuPreset::board_power_watts, gpus);
  if (purchase && power && r.kwh_price) {
    in.owned = OwnedMachine{.purchase_price = *purchase,
                            .amortisation_years = r.years.value_or(3.0),
                            .power_watts = *power,
                            .kwh_price = *r.kwh_price,
                            .utilisation = r.utilisation.value_or(in.hours_per_day / 24.0),
                            .other_per_year = r.other_per_year.value_or(0.0)};
    return;
  }
  std::vector<std::string> missing;
  if (!purchase) missing.emplace_back("--purchase-price");
  if (!power) missing.emplace_back("--power-watts");
  if (!r.kwh_price) missing.emplace_back("--kwh-price");
  in.notes.push_back(fmt::format("owned hardware not priced: give {}", fmt::join(missing, ", ")));
}

}  // namespace

CostRequest with_defaults(const CostRequest& request, const CostRequest& base) {
  CostRequest r = request;
  take_default(r.title, base.title);
  take_default(r.currency, base.currency);
  take_default(r.preset, base.preset);
  take_default(r.gpus, base.gpus);
  take_default(r.gpu_hour_price, base.gpu_hour_price);
  take_default(r.purchase_price, base.purchase_price);
  take_default(r.power_watts, base.power_watts);
  take_default(r.kwh_price, base.kwh_price);
  take_default(r.years, base.years);
  take_default(r.utilisation, base.utilisation);
  take_default(r.other_per_year, base.other_per_year);
  take_default(r.hours_per_day, base.hours_per_day);
  take_default(r.tokens_per_s, base.tokens_per_s);
  take_default(r.bench_path, base.bench_path);
  take_default(r.phase, base.phase);
  take_default(r.job_hours, base.job_hours);
  take_default(r.job_tokens, base.job_tokens);
  return r;
}

CostInputs resolve_cost_request(const CostRequest& r) {
  CostInputs in;
  in.title = r.title.value_or("");
  in.currency = r.currency.value_or("$");
  const int gpus = r.gpus.value_or(1);
  if (gpus < 1) fail("--gpus {}: must be at least 1", gpus);
  if (r.preset) in.preset = &find_gpu_preset(*r.preset);
  in.hours_per_day = r.hours_per_day.value_or(24.0);
  require_in_range(in.hours_per_day, 0.0, 24.0, "--hours-per-day");
  if (r.tokens_per_s && r.bench_path) fail("--tokens-per-s and --bench: give one of them, not both");
  if (r.tokens_per_s)
    in.throughputs.push_back({.phase = r.phase.value_or("given"),
                              .batch = 0,
                              .tokens_per_s = *r.tokens_per_s,
                              .source = "--tokens-per-s"});
  if (r.bench_path) add_bench_throughputs(in, *r.bench_path, r.phase.value_or(""), gpus);
  const std::optional<double> cloud_price = r.gpu_hour_price ? r.gpu_hour_price
                                            : in.preset
                                                ? std::optional(in.preset->cloud_price_per_gpu_hour.value)
                                                : std::nullopt;
  if (cloud_price) in.cloud = CloudPrice{.price_per_gpu_hour = *cloud_price, .gpus = gpus};
  add_owned(in, r, gpus);
  if (in.preset != nullptr && in.currency != "$")
    in.notes.push_back(fmt::format("the {} preset's prices are US dollars: --currency {} only relabels them",
                                   in.preset->name, in.currency));
  in.job_hours = r.job_hours;
  in.job_tokens = r.job_tokens;
  return in;
}

}  // namespace tokenmill
