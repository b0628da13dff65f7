// What a user asks `tokenmill cost`, flag by flag, and how it becomes CostInputs. A field
// left unset takes its value from the preset, the worked example or the default below.
#pragma once

#include <optional>
#include <string>

#include "cost/cost_report.h"

namespace tokenmill {

struct CostRequest {
  std::optional<std::string> title;       // what is priced, printed first
  std::optional<std::string> currency;    // --currency: a label, default "$"
  std::optional<std::string> preset;      // --preset: see cost/gpu_presets.h
  std::optional<int> gpus;                // --gpus: default 1
  std::optional<double> gpu_hour_price;   // --gpu-hour-price: default the preset's
  std::optional<double> purchase_price;   // --purchase-price, whole machine: default preset x gpus
  std::optional<double> power_watts;      // --power-watts, whole machine: default preset board power x gpus
  std::optional<double> kwh_price;        // --kwh-price: no default
  std::optional<double> years;            // --years of amortisation: default 3
  std::optional<double> utilisation;      // --utilisation: default hours_per_day / 24
  std::optional<double> other_per_year;   // --other-per-year: default 0
  std::optional<double> hours_per_day;    // --hours-per-day: default 24
  std::optional<double> tokens_per_s;     // --tokens-per-s of the whole machine
  std::optional<std::string> bench_path;  // --bench: a bench.json measured on one device
  std::optional<std::string> phase;       // --phase: which bench phase, or the label of --tokens-per-s
  std::optional<double> job_hours;        // --job-hours
  std::optional<double> job_tokens;       // --job-tokens
};

// `request` with each unset field taken from `base`.
CostRequest with_defaults(const CostRequest& request, const CostRequest& base);

// Looks up the preset, reads the bench file, fills the defaults and adds notes for what the
// user should know (a side not priced for lack of a flag, a bench device that matches a
// preset, throughput scaled to --gpus). A bench.json measures one device: with --gpus N its
// throughputs are multiplied by N (linear scaling, said in a note). Throws Error naming the
// flag or the file for input that cannot be priced.
CostInputs resolve_cost_request(const CostRequest& request);

}  // namespace tokenmill
