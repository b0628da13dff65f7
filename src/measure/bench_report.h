// What `tokenmill bench` reports: bench.json (schema "tokenmill.bench/1", see bench/README.md),
// a markdown report and a short terminal table, all from one BenchRun.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "measure/bench_compare.h"
#include "measure/bench_runner.h"

namespace tokenmill {

inline constexpr const char* kBenchSchema = "tokenmill.bench/1";

// A phase judged against the run's ceilings (measure/roofline.h).
struct PhaseMetrics {
  double tokens_per_s = 0;
  double flops_per_token = 0;
  double achieved_flops = 0;  // FLOP/s
  double mfu = 0;
  double bytes_per_token = 0;
  double achieved_bandwidth = 0;  // bytes/s
  double intensity = 0;           // FLOPs per byte
  double roofline_fraction = 0;
  std::string bound;  // "compute" | "memory"
};

PhaseMetrics phase_metrics(const PhaseMeasurement& phase, const Ceilings& ceilings);

// The bench.json object; `created_utc` as "YYYY-MM-DDTHH:MM:SSZ".
nlohmann::json bench_json(const BenchRun& run, const std::optional<Comparison>& compare,
                          const std::string& created_utc);
// The current time in that form.
std::string utc_now();

// The report as markdown: setting, ceilings, one row per phase, the peer's ratios, the notes
// (caps, phases skipped, how each phase is counted), links to the charts.
std::string bench_markdown(const BenchRun& run, const std::optional<Comparison>& compare);

// The terminal summary: per phase tokens/s, MFU, achieved bandwidth and roofline fraction,
// and the ceilings.
std::string bench_table(const BenchRun& run, const std::optional<Comparison>& compare);

// Writes bench.json, bench.md, throughput.svg and roofline.svg into `dir` (created if
// needed); Error naming the file when one cannot be written.
void write_bench_report(const std::filesystem::path& dir, const nlohmann::json& json, const BenchRun& run,
                        const std::optional<Comparison>& compare);

// 1234567 -> "1.23 M": three significant digits and an SI prefix (k, M, G, T, P).
std::string si(double value);

}  // namespace tokenmill
