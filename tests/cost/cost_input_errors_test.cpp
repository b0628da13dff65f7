// Bad input to `tokenmill cost` is refused with an Error naming the flag, or the file and the
// field: negative or non-finite prices, zero or negative throughput, utilisation outside
// (0, 1], zero years, and malformed bench.json files.
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "cost/bench_sample.h"
#include "cost/cost_request.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace tokenmill {
namespace {

using testing::expect_error;
using testing::sample_bench;
using testing::TempDir;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A request that prices both sides of an H100 at 0.2 per kWh, changed by `edit`.
void price(const std::function<void(CostRequest&)>& edit) {
  CostRequest r;
  r.preset = "h100-sxm";
  r.kwh_price = 0.2;
  r.tokens_per_s = 1000;
  edit(r);
  compute_cost(resolve_cost_request(r));
}

TEST(CostInputErrors, ValidRequestPrices) {
  price([](CostRequest&) {});
}

TEST(CostInputErrors, NegativeOrNonFinitePrices) {
  expect_error([] { price([](CostRequest& r) { r.gpu_hour_price = -1; }); }, {"--gpu-hour-price -1", ">= 0"});
  expect_error([] { price([](CostRequest& r) { r.purchase_price = kNaN; }); }, {"--purchase-price nan"});
  expect_error([] { price([](CostRequest& r) { r.kwh_price = kInf; }); }, {"--kwh-price inf"});
  expect_error([] { price([](CostRequest& r) { r.kwh_price = -0.1; }); }, {"--kwh-price -0.1"});
  expect_error([] { price([](CostRequest& r) { r.power_watts = -700; }); }, {"--power-watts -700"});
  expect_error([] { price([](CostRequest& r) { r.other_per_year = -5; }); }, {"--other-per-year -5"});
}

TEST(CostInputErrors, ThroughputMustBePositive) {
  expect_error([] { price([](CostRequest& r) { r.tokens_per_s = 0; }); }, {"--tokens-per-s 0", "> 0"});
  expect_error([] { price([](CostRequest& r) { r.tokens_per_s = -3; }); }, {"--tokens-per-s -3"});
  expect_error([] { price([](CostRequest& r) { r.tokens_per_s = kNaN; }); }, {"--tokens-per-s nan"});
}

TEST(CostInputErrors, UtilisationYearsHoursGpus) {
  expect_error([] { price([](CostRequest& r) { r.utilisation = 0; }); }, {"--utilisation 0", "(0, 1]"});
  expect_error([] { price([](CostRequest& r) { r.utilisation = 1.5; }); }, {"--utilisation 1.5", "(0, 1]"});
  expect_error([] { price([](CostRequest& r) { r.years = 0; }); }, {"--years 0", "> 0"});
  expect_error([] { price([](CostRequest& r) { r.hours_per_day = 25; }); },
               {"--hours-per-day 25", "(0, 24]"});
  expect_error([] { price([](CostRequest& r) { r.gpus = 0; }); }, {"--gpus 0", "at least 1"});
  expect_error([] { price([](CostRequest& r) { r.job_hours = -2; }); }, {"--job-hours -2"});
}

TEST(CostInputErrors, InconsistentRequests) {
  expect_error([] { price([](CostRequest& r) { r.preset = "tpu"; }); }, {"--preset tpu", "known: rtx4090"});
  expect_error([] { compute_cost(resolve_cost_request(CostRequest{})); }, {"nothing to price", "--preset"});
  expect_error(
      [] {
        price([](CostRequest& r) {
          r.tokens_per_s.reset();
          r.job_tokens = 1e9;
        });
      },
      {"--job-tokens needs a throughput"});
  expect_error(
      [] {
        price([](CostRequest& r) {
          r.job_hours = 1;
          r.job_tokens = 1e9;
        });
      },
      {"--job-hours and --job-tokens"});
  expect_error([] { price([](CostRequest& r) { r.bench_path = "bench.json"; }); },
               {"--tokens-per-s and --bench"});
}

// Prices the bench file with `contents`; the error must name the file and `parts`.
void expect_bench_error(const std::string& contents, const std::vector<std::string>& parts,
                        const std::string& phase = "") {
  const TempDir dir;
  const std::string path = dir.write("bench.json", contents).string();
  std::vector<std::string> all = parts;
  all.push_back(path);
  expect_error(
      [&] {
        price([&](CostRequest& r) {
          r.tokens_per_s.reset();
          r.bench_path = path;
          if (!phase.empty()) r.phase = phase;
        });
      },
      all);
}

TEST(CostInputErrors, MalformedBenchFiles) {
  expect_bench_error("{\"schema\": ", {"invalid JSON"});
  expect_bench_error("[1, 2]", {"not a tokenmill bench file"});
  auto bench = sample_bench();
  bench["schema"] = "tokenmill.bench/2";
  expect_bench_error(bench.dump(), {"schema is \"tokenmill.bench/2\"", "tokenmill.bench/1"});
  bench = sample_bench();
  bench.erase("schema");
  expect_bench_error(bench.dump(), {"missing field schema"});
  bench = sample_bench();
  bench.erase("phases");
  expect_bench_error(bench.dump(), {"missing field phases"});
  bench = sample_bench();
  bench["phases"] = nlohmann::json::object({{"phase", "decode"}});
  expect_bench_error(bench.dump(), {"phases must be an array, not object"});
  bench["phases"] = nlohmann::json::array({nlohmann::json::array({1, 2})});
  expect_bench_error(bench.dump(), {"phases[0] must be an object, not array"});
  bench = sample_bench();
  bench["device"]["name"] = 7;
  expect_bench_error(bench.dump(), {"device.name must be a string, not number"});
  bench = sample_bench();
  bench["phases"][1].erase("batch");
  expect_bench_error(bench.dump(), {"missing field phases[1].batch"});
  bench = sample_bench();
  bench["phases"][2]["tokens_per_s"] = "fast";
  expect_bench_error(bench.dump(), {"phases[2].tokens_per_s must be a number or null, not string"});
  bench = sample_bench();
  bench["phases"][2]["tokens_per_s"] = nullptr;
  expect_bench_error(bench.dump(), {"phases[2].tokens_per_s is null", "decode at batch 8"});
  bench = sample_bench();
  bench["phases"][2]["tokens_per_s"] = 0;
  expect_bench_error(bench.dump(), {"phases[2].tokens_per_s is 0"});
}

TEST(CostInputErrors, BenchWithoutThePhaseAsked) {
  auto bench = sample_bench();
  bench["phases"] = nlohmann::json::array({testing::phase_entry("prefill", 1, 1000.0)});
  expect_bench_error(bench.dump(), {"no \"train\" or \"decode\" entry", "phases present: prefill"});
  expect_bench_error(sample_bench().dump(), {"no \"train\" entry", "phases present: prefill, decode"},
                     "train");
}

TEST(CostInputErrors, MissingBenchFile) {
  expect_error(
      [] {
        price([](CostRequest& r) {
          r.tokens_per_s.reset();
          r.bench_path = "/nonexistent/bench.json";
        });
      },
      {"/nonexistent/bench.json", "cannot read"});
}

}  // namespace
}  // namespace tokenmill
