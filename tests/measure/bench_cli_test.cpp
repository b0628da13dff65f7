// `tokenmill bench` as a user runs it, on the tiny Llama fixture and on the smallest --shape
// with a short prompt, few decode steps and a short calibration (fast), and with bad input.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/gpu_devices.h"
#include "support/run_command.h"
#include "support/temp_dir.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
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
  // prefill, decode at batch 1, 2, 4, 8 (the default sweep), train (f32 weights, tiny model).
  ASSERT_EQ(json["phases"].size(), 6u);
  for (const auto& phase : json["phases"]) {
    EXPECT_GT(phase["tokens_per_s"].get<double>(), 0.0) << phase;
    EXPECT_GT(phase["mfu"].get<double>(), 0.0) << phase;
  }
  for (size_t i = 1; i <= 4; ++i) {
    EXPECT_EQ(json["phases"][i]["phase"], "decode");
    EXPECT_EQ(json["phases"][i]["batch"], 1 << (i - 1));
    EXPECT_EQ(json["phases"][i]["tokens"], 8 << (i - 1));
  }
  EXPECT_EQ(json["phases"][5]["phase"], "train");
  EXPECT_EQ(json["phases"][5]["tokens"], 32);
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

// --train-precision bf16: the train phase multiplies with a bf16 copy, and the MFU is against a
// bf16 GEMM; the prefill of bf16 weights is judged against a bf16 GEMM too, f32 ones' f32.
TEST(BenchCli, TheRooflineGemmHasTheWeightsTheWorkMultipliesWith) {
  CommandResult r = run_tokenmill(
      "-t 2 bench -m " + kLlama + kQuick + " --phases train --train-batch 2 --train-precision bf16 --json",
      /*with_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto json = nlohmann::json::parse(r.output);
  EXPECT_EQ(json["roofline"]["gemm"], "bf16 1024x1024x1024");
  ASSERT_EQ(json["phases"].size(), 1u);
  EXPECT_EQ(json["phases"][0]["phase"], "train");
  EXPECT_EQ(json["phases"][0]["tokens"], 64);  // 2 sequences of the prompt's 32 tokens
  EXPECT_GT(json["phases"][0]["mfu"].get<double>(), 0);
  EXPECT_THAT(json["notes"].dump(), HasSubstr("train phase in bf16"));

  EXPECT_THAT(json["notes"].dump(), Not(HasSubstr("roofline's GEMM")));

  // A prefill of f32 weights beside a bf16 train phase: the GEMM is the train phase's, and a
  // note says the prefill's MFU is against it.
  r = run_tokenmill(
      "-t 2 bench -m " + kLlama + kQuick + " --phases prefill,train --train-precision bf16 --json",
      /*with_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json = nlohmann::json::parse(r.output);
  EXPECT_EQ(json["roofline"]["gemm"], "bf16 1024x1024x1024");
  EXPECT_THAT(json["notes"].dump(), HasSubstr("prefill and decode multiply f32 ones"));

  r = run_tokenmill("-t 2 bench -m " + kLlama + kQuick + " --phases prefill --json", /*with_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["roofline"]["gemm"], "f32 1024x1024x1024");
  r = run_tokenmill(
      "-t 2 bench --shape gpt2-124m --dtype f16 --prompt-tokens 4 --decode-tokens 1 "
      "--calibration-seconds 0.02 --phases prefill --json",
      /*with_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["roofline"]["gemm"], "f16 1024x1024x1024");
}

// The decode phase's tokens take context from the prompt only when that phase runs: a train
// phase alone gets sequences of the whole context (the fixture's 128 positions).
TEST(BenchCli, ATrainPhaseAloneHasTheWholeContext) {
  CommandResult r = run_tokenmill(
      "-t 2 bench -m " + kLlama + " --phases train --prompt-tokens 128 --calibration-seconds 0.02 --json",
      /*with_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto json = nlohmann::json::parse(r.output);
  EXPECT_EQ(json["phases"][0]["tokens"], 128);
  EXPECT_THAT(json["notes"].dump(), Not(HasSubstr("capped")));
  r = run_tokenmill("-t 2 bench -m " + kLlama +
                        " --phases prefill,decode --batch 1 --prompt-tokens 128 --decode-tokens 8 "
                        "--calibration-seconds 0.02 --json",
                    /*with_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json = nlohmann::json::parse(r.output);
  EXPECT_EQ(json["phases"][0]["tokens"], 120);  // 128 - 8 decode tokens
  EXPECT_THAT(json["notes"].dump(), HasSubstr("prompt capped from 128 to 120 tokens"));
}

TEST(BenchCli, BadInputIsAClearError) {
  const std::pair<std::string, std::string> cases[] = {
      {"-m /nonexistent/model" + kQuick, "error: model '/nonexistent/model' does not exist"},
      {"-m " + kLlama + kQuick + " --compare false", "error: --compare: 'false' failed"},
      {"-m " + kLlama + " --decode-tokens 0", "--decode-tokens"},
      {"-m " + kLlama + kQuick + " --batch 1,two", "error: --batch: 'two' is not a batch size"},
      {"-m " + kLlama + kQuick + " --phases prefill,sample", "error: --phases: 'sample' is not a phase"},
      {"-m " + kLlama + " --dtype bf16" + kQuick, "error: --dtype applies to --shape only"},
      {"-m " + kLlama + kQuick + " --phases train --train-precision fp16",
       "error: bench: the train phase runs in fp32 or bf16"},
      {"-m " + kLlama + kQuick + " --train-precision fp64",
       "error: --train-precision: unknown precision 'fp64'"},
  };
  for (const auto& [args, error] : cases) {
    const CommandResult r = run_tokenmill("bench " + args);
    EXPECT_GT(r.exit_code, 0) << args;
    EXPECT_THAT(r.output, HasSubstr(error)) << args;
  }
}

TEST(BenchCli, DeviceCudaWithoutAGpuIsRefusedWithTheReason) {
  if (tokenmill::testing::cuda_usable()) GTEST_SKIP() << "a GPU is usable here";
  CommandResult r = run_tokenmill("bench -m " + kLlama + kQuick + " --phases prefill --device cuda");
  EXPECT_GT(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("error: --device cuda: " + tokenmill::cuda_unavailable_reason()))
      << r.output;
  EXPECT_THAT(r.output, Not(HasSubstr("prefill"))) << r.output;
  r = run_tokenmill("bench -m " + kLlama + kQuick + " --device tpu");
  EXPECT_GT(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("error: --device tpu: expected auto, cpu, cuda or cuda:N"));
}

TEST(BenchCli, DeviceAutoFallsBackToTheCpuWithOneNote) {
  if (tokenmill::testing::cuda_usable()) GTEST_SKIP() << "a GPU is usable here";
  const std::string args = "bench -m " + kLlama + kQuick + " --phases prefill --device auto --json";
  CommandResult r = run_tokenmill(args, /*with_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto json = nlohmann::json::parse(r.output);
  EXPECT_EQ(json["device"]["backend"], "cpu");
  EXPECT_EQ(json["gpu_sampling"], "not sampled: the run is on the CPU");
  EXPECT_EQ(json["phases"].size(), 1u);
  r = run_tokenmill(args);  // stdout and stderr
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string note = "note: running on the CPU: " + tokenmill::cuda_unavailable_reason() + "\n";
  EXPECT_THAT(r.output, HasSubstr(note));
  EXPECT_EQ(r.output.find("note: "), r.output.rfind("note: ")) << "one note line only:\n" << r.output;
}

TEST(BenchCli, ShapeErrors) {
  CommandResult r = run_tokenmill("bench --shape llama-9000" + kQuick);
  EXPECT_GT(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("error: unknown --shape 'llama-9000': the known shapes are gpt2-124m,"));
  r = run_tokenmill("bench -m " + kLlama + " --shape gpt2-124m" + kQuick);
  EXPECT_GT(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("error: give either -m MODEL or --shape NAME, not both"));
  r = run_tokenmill("bench" + kQuick);
  EXPECT_GT(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("error: bench needs a model: -m MODEL"));
  r = run_tokenmill("bench --shape gpt2-124m --dtype f8" + kQuick);
  EXPECT_GT(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("error: --dtype must be f32, bf16 or f16, got 'f8'"));
  // 8B parameters at 18 bytes each (f32 master copy + bf16 weights): refused before allocating.
  r = run_tokenmill("bench --shape llama-3-8b --dtype bf16 --max-memory-gib 64" + kQuick);
  EXPECT_GT(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("error: bench: the random bf16 weights of llama-3-8b"));
  EXPECT_THAT(r.output, HasSubstr("need 134.62 GiB but only 64.00 GiB of memory are available"));
}

TEST(BenchCli, ShapeListNamesThePresets) {
  const CommandResult r = run_tokenmill("bench --shape list");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* name :
       {"gpt2-124m", "smollm2-135m", "qwen2.5-0.5b", "llama-3.2-1b", "mistral-7b", "llama-3-8b"})
    EXPECT_THAT(r.output, HasSubstr(name));
  EXPECT_THAT(r.output, HasSubstr("124439808"));
  EXPECT_THAT(r.output, HasSubstr("https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json"));
}

// The smallest preset end to end: random GPT-2 124M weights, a batch sweep and a train step.
TEST(BenchCli, ShapeRunsEveryPhase) {
  const CommandResult r = run_tokenmill(
      "-t 2 bench --shape gpt2-124m --prompt-tokens 8 --decode-tokens 2 --batch 1,2 --calibration-seconds "
      "0.02 "
      "--json",
      /*with_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto json = nlohmann::json::parse(r.output);
  EXPECT_EQ(json["model"]["name"], "gpt2-124m");
  EXPECT_EQ(json["model"]["synthetic"], true);
  EXPECT_EQ(json["model"]["weight_dtype"], "f32");
  EXPECT_EQ(json["model"]["parameters"], 124'439'808);
  // f32: every tensor once (lm_head tied), 4 bytes a parameter.
  EXPECT_EQ(json["model"]["weight_bytes"], 4 * 124'439'808);
  ASSERT_EQ(json["phases"].size(), 4u);
  const std::vector<std::pair<std::string, int>> expected = {
      {"prefill", 1}, {"decode", 1}, {"decode", 2}, {"train", 1}};
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& phase = json["phases"][i];
    EXPECT_EQ(phase["phase"], expected[i].first);
    EXPECT_EQ(phase["batch"], expected[i].second);
    for (const char* field :
         {"tokens_per_s", "mfu", "achieved_flops", "achieved_bandwidth", "roofline_fraction"}) {
      const double v = phase[field].get<double>();
      EXPECT_TRUE(std::isfinite(v) && v > 0) << field << " of " << phase;
    }
  }
  EXPECT_EQ(json["phases"][2]["tokens"], 4);  // 2 sequences x 2 steps
  EXPECT_EQ(json["phases"][3]["tokens"], 8);  // one sequence of the prompt's length
  // A training step costs 3 x the forward of its 8 tokens, every token's logits included:
  // 3 x (2 x 123,532,032 matmul parameters x 8 + 4 x 768 x (1 + ... + 8) x 12 layers) / 8
  // = 3 x (1,976,512,512 + 1,327,104) / 8 = 741,689,856 per token.
  EXPECT_DOUBLE_EQ(json["phases"][3]["flops_per_token"].get<double>(), 741'689'856.0);
}

}  // namespace
