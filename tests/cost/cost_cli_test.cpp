// `tokenmill cost` as a user runs it: the worked example, a bench.json, and errors (non-zero
// exit, the message on stderr).
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cost/bench_sample.h"
#include "support/run_command.h"
#include "support/temp_dir.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using tokenmill::testing::CommandResult;
using tokenmill::testing::run_tokenmill;

TEST(CostCli, WorkedExampleTable) {
  const CommandResult r = run_tokenmill("cost --example");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("preset H100 SXM"));
  EXPECT_THAT(r.output, HasSubstr("editable defaults"));
  EXPECT_THAT(r.output, HasSubstr("821.92"));  // 180 h x 30000 / (3 x 8760 x 0.25)
  EXPECT_THAT(r.output, HasSubstr("75.60"));   // 180 h x 0.7 kW x 0.6
  EXPECT_THAT(r.output, HasSubstr("897.52"));
  EXPECT_THAT(r.output, HasSubstr("680.40"));  // 180 h x 3.78
  EXPECT_THAT(r.output, HasSubstr("48.92 months"));
}

TEST(CostCli, WorkedExampleJson) {
  const CommandResult r = run_tokenmill("cost --example --json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto out = nlohmann::json::parse(r.output);
  EXPECT_EQ(out["preset"]["key"], "h100-sxm");
  EXPECT_DOUBLE_EQ(out["job"]["hours"].get<double>(), 180);
  EXPECT_NEAR(out["job"]["owned"]["energy"].get<double>(), 75.6, 1e-9);
  EXPECT_NEAR(out["job"]["cloud"].get<double>(), 680.4, 1e-9);
  EXPECT_NEAR(out["break_even"]["months"].get<double>(), 30000 / 613.2, 1e-9);
  EXPECT_EQ(out["break_even"]["within_amortisation"], false);
}

TEST(CostCli, PricesABenchFile) {
  const tokenmill::testing::TempDir dir;
  const auto bench =
      dir.write("bench.json", tokenmill::testing::sample_bench("NVIDIA H100 80GB HBM3").dump());
  const CommandResult r = run_tokenmill(
      "cost --bench " + bench.string() + " --gpu-hour-price 3.6 --json --job-tokens 3.24e6", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto out = nlohmann::json::parse(r.output);
  ASSERT_EQ(out["phases"].size(), 1u);
  EXPECT_EQ(out["phases"][0]["phase"], "decode");
  EXPECT_EQ(out["phases"][0]["batch"], 8);
  // 3.6 per hour / (900 tok/s x 3600 s) x 1e6 = 1.1111 per million tokens
  EXPECT_NEAR(out["phases"][0]["cloud_per_million_tokens"].get<double>(), 1.0 / 0.9, 1e-9);
  EXPECT_TRUE(out["phases"][0]["owned_per_million_tokens"].is_null());
  // 3.24e6 tokens / (900 tok/s x 3600 s) = 1 h; x 3.6 = 3.6
  EXPECT_NEAR(out["job"]["hours"].get<double>(), 1.0, 1e-12);
  EXPECT_NEAR(out["job"]["cloud"].get<double>(), 3.6, 1e-9);
  EXPECT_THAT(out["notes"].dump(), HasSubstr("--preset h100-sxm"));
}

TEST(CostCli, ErrorsGoToStderrWithNonZeroExit) {
  for (const std::string args :
       {"cost --preset h100-sxm --tokens-per-s 0", "cost --gpu-hour-price -1",
        "cost --preset h100-sxm --kwh-price 0.2 --utilisation 1.5",
        "cost --bench /nonexistent/bench.json --preset h200", "cost --preset b200"}) {
    const CommandResult with_stderr = run_tokenmill(args);
    EXPECT_EQ(with_stderr.exit_code, 1) << args << "\n" << with_stderr.output;
    EXPECT_THAT(with_stderr.output, HasSubstr("error: ")) << args;
    const CommandResult stdout_only = run_tokenmill(args, false);
    EXPECT_THAT(stdout_only.output, Not(HasSubstr("error"))) << args;
  }
  EXPECT_THAT(run_tokenmill("cost --preset h100-sxm --tokens-per-s 0").output, HasSubstr("--tokens-per-s 0"));
  EXPECT_THAT(run_tokenmill("cost --preset b200").output, HasSubstr("known: rtx4090"));
}

}  // namespace
