// `tokenmill bench` as a user runs it, on the tiny Llama fixture with a short prompt, few
// decode steps and a short calibration (fast), and with bad input.
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/run_command.h"
#include "support/temp_dir.h"

namespace {

using ::testing::HasSubstr;
using tokenmill::testing::CommandResult;
using tokenmill::testing::run_tokenmill;

const std::string kLlama = std::string(TOKENMILL_FIXTURES_DIR) + "/hf/llama";
const std::string kQuick = " --prompt-tokens 32 --decode-tokens 8 --calibration-seconds 0.02";

TEST(BenchCli, WritesTheReportAndMeasuresSomething) {
  const tokenmill::testing::TempDir dir;
  const std::string out = (dir.path() / "report").string();
  const CommandResult r = run_tokenmill("-t 2 bench -m " + kLlama + kQuick + " --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("prefill"));
  EXPECT_THAT(r.output, HasSubstr("ceilings"));
  for (const char* file : {"bench.json", "bench.md", "throughput.svg", "roofline.svg"})
    EXPECT_TRUE(std::filesystem::is_regular_file(dir.path() / "report" / file)) << file;
  const auto json = nlohmann::json::parse(dir.read("report/bench.json"));
  EXPECT_EQ(json["schema"], "tokenmill.bench/1");
  EXPECT_EQ(json["device"]["threads"], 2);
  EXPECT_EQ(json["model"]["architecture"], "LlamaForCausalLM");
  EXPECT_GT(json["roofline"]["peak_flops"].get<double>(), 0.0);
  EXPECT_GT(json["roofline"]["read_bandwidth"].get<double>(), 0.0);
  ASSERT_EQ(json["phases"].size(), 2u);
  for (const auto& phase : json["phases"]) {
    EXPECT_EQ(phase["batch"], 1);
    EXPECT_GT(phase["tokens_per_s"].get<double>(), 0.0) << phase;
    EXPECT_GT(phase["mfu"].get<double>(), 0.0) << phase;
  }
  // Prefill runs the same f32 matmuls as the calibration GEMM, on smaller matrices: it cannot
  // beat it. (The fixture's decode can: its single-threaded matrix-vector products read
  // 400 kB of weights from cache, while the 2-thread GEMM peak suffers on a busy machine.)
  EXPECT_LE(json["phases"][0]["mfu"].get<double>(), 1.0);
  EXPECT_EQ(json["phases"][0]["tokens"], 32);
  EXPECT_EQ(json["phases"][1]["tokens"], 8);
  EXPECT_GT(json["peak_memory_bytes"].get<double>(), 0.0);
}

TEST(BenchCli, JsonOnStdoutCapsToTheContextAndComparesWithAPeer) {
  // The fixture's context is 128: 200 + 8 tokens do not fit, the prompt is capped to 120.
  const std::string peer =
      R"(--compare "echo '{\"phases\": [{\"phase\": \"decode\", \"batch\": 1, \"tokens_per_s\": 1}]}'")";
  const CommandResult r =
      run_tokenmill("bench -m " + kLlama +
                        " --prompt-tokens 200 --decode-tokens 8 --calibration-seconds 0.02 --json " + peer,
                    /*with_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto json = nlohmann::json::parse(r.output);
  EXPECT_EQ(json["phases"][0]["tokens"], 120);
  EXPECT_THAT(json["notes"][0].get<std::string>(), HasSubstr("prompt capped from 200 to 120"));
  EXPECT_GT(json["compare"]["phases"][0]["ratio"].get<double>(), 0.0);
}

TEST(BenchCli, BadInputIsAClearError) {
  CommandResult r = run_tokenmill("bench -m /nonexistent/model" + kQuick);
  EXPECT_GT(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("error: model '/nonexistent/model' does not exist"));
  r = run_tokenmill("bench -m " + kLlama + kQuick + " --compare false");
  EXPECT_GT(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("error: --compare: 'false' failed"));
  r = run_tokenmill("bench -m " + kLlama + " --decode-tokens 0");
  EXPECT_GT(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("--decode-tokens"));
}

}  // namespace
