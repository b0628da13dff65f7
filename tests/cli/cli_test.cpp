// The tokenmill binary as a user runs it: outputs, exit codes, and a clear
// "error: ..." (never a crash or a signal) for every bad flag or input.
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backend/cuda_availability.h"
#include "core/json_file.h"
#include "support/gpu_devices.h"
#include "support/run_command.h"

namespace {

using ::testing::HasSubstr;

using tokenmill::testing::CommandResult;

CommandResult run(const std::string& args) { return tokenmill::testing::run_tokenmill(args); }
// stdout alone: what --json promises to keep clean (notes and progress go to stderr).
CommandResult run_stdout(const std::string& args) { return tokenmill::testing::run_tokenmill(args, false); }

const std::string kLlama = std::string(TOKENMILL_FIXTURES_DIR) + "/hf/llama";
const std::string kGpt2 = std::string(TOKENMILL_FIXTURES_DIR) + "/hf/gpt2";

// A user error: non-zero exit (not a signal), and the message.
void expect_user_error(const std::string& args, const std::string& message) {
  const CommandResult r = run(args);
  EXPECT_GT(r.exit_code, 0) << args << "\n" << r.output;
  EXPECT_THAT(r.output, HasSubstr(message)) << args;
}

TEST(Cli, InfoJsonDescribesTheModel) {
  const CommandResult r = run("info -m " + kLlama + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto info = nlohmann::json::parse(r.output);
  EXPECT_EQ(info["architecture"], "LlamaForCausalLM");
  EXPECT_EQ(info["num_key_value_heads"], 2);
  EXPECT_EQ(info["rope_scaling"], "llama3");
  EXPECT_EQ(info["context_length"], 128);
  EXPECT_EQ(info["kv_cache_bytes_per_token"], 2 * 2 * 2 * 16 * 4);
  // 2 embeddings of 256 x 64, 2 layers of (q 64x64, k,v 32x64, o 64x64, mlp 3 x 64x128, 2 norms), final norm.
  EXPECT_EQ(info["parameters"], 2 * 256 * 64 + 2 * (64 * 64 * 2 + 32 * 64 * 2 + 3 * 64 * 128 + 2 * 64) + 64);
}

TEST(Cli, InfoSaysWhichLayersSlideAndWhatIsCapped) {
  const CommandResult r = run("info -m " + std::string(TOKENMILL_FIXTURES_DIR) + "/hf/gemma2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("sliding window 4 positions, in 2 of 3 layers"));
  EXPECT_THAT(r.output, HasSubstr("soft caps      scores 2, logits 5"));
  EXPECT_THAT(r.output, HasSubstr("geglu"));
}

TEST(Cli, InfoTextMentionsArchitecture) {
  const CommandResult r = run("info -m " + kGpt2);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("GPT2LMHeadModel"));
  EXPECT_THAT(r.output, HasSubstr("tied"));
}

TEST(Cli, GreedyGenerateJsonMatchesTransformers) {
  const auto expected = tokenmill::read_json_file(kGpt2 + "/expected.json");
  const auto& greedy = expected["greedy"][1];
  const std::string ids = fmt::format("{}", fmt::join(greedy["prompt"].get<std::vector<int>>(), ","));
  for (const std::string weights : {"", " --no-mmap"}) {  // read in place, or copied at load
    const CommandResult r = run_stdout("generate -m " + kGpt2 + " --prompt-ids " + ids +
                                       " -n 32 --temperature 0 --ignore-eos --json" + weights);
    ASSERT_EQ(r.exit_code, 0) << weights << ": " << r.output;
    const auto out = nlohmann::json::parse(r.output);
    EXPECT_EQ(out["ids"], greedy["ids"]) << weights;
    EXPECT_EQ(out["finish_reason"], "length");
    EXPECT_GT(out["decode_tokens_per_s"].get<double>(), 0.0);
    EXPECT_GT(out["prompt_tokens_per_s"].get<double>(), 0.0);
  }
}

// On GPU 0 (a real one, or the CUDA emulation's), greedy decoding gives the CPU's ids.
TEST(Cli, GreedyGenerateOnCudaGivesTheCpuIds) {
  if (!tokenmill::testing::cuda_usable()) GTEST_SKIP() << tokenmill::cuda_unavailable_reason();
  for (const char* fixture : {"gpt2", "llama", "llama_bf16", "mistral", "qwen2", "smollm_chat"}) {
    const std::string args = "generate -m " + std::string(TOKENMILL_FIXTURES_DIR) + "/hf/" + fixture +
                             " --prompt-ids 5,6,7,8 -n 16 --temperature 0 --ignore-eos --json --device ";
    const CommandResult cpu = run_stdout(args + "cpu");
    const CommandResult cuda = run_stdout(args + "cuda");
    ASSERT_EQ(cpu.exit_code, 0) << fixture << ": " << cpu.output;
    ASSERT_EQ(cuda.exit_code, 0) << fixture << ": " << cuda.output;
    EXPECT_EQ(nlohmann::json::parse(cuda.output)["ids"], nlohmann::json::parse(cpu.output)["ids"]) << fixture;
  }
}

TEST(Cli, SameSeedSameSample) {
  const std::string args =
      "generate -m " + kLlama + " --prompt-ids 5,6,7 -n 24 --temperature 1.5 --ignore-eos --json";
  const auto a = nlohmann::json::parse(run_stdout(args + " --seed 42").output);
  const auto b = nlohmann::json::parse(run_stdout(args + " --seed 42").output);
  const auto c = nlohmann::json::parse(run_stdout(args + " --seed 43").output);
  EXPECT_EQ(a["ids"], b["ids"]);
  EXPECT_NE(a["ids"], c["ids"]);
  EXPECT_EQ(a["seed"], 42);
}

TEST(Cli, WarmupChangesOnlyTheTiming) {
  // The untimed first pass must leave neither sampler state nor a cached prompt behind.
  const std::string args = "generate -m " + kLlama +
                           " --prompt-ids 5,6,7,8,9 -n 16 --temperature 1.5 --seed 7 --ignore-eos --json";
  const CommandResult cold = run_stdout(args), warm = run_stdout(args + " --warmup");
  ASSERT_EQ(cold.exit_code, 0) << cold.output;
  ASSERT_EQ(warm.exit_code, 0) << warm.output;
  const auto a = nlohmann::json::parse(cold.output), b = nlohmann::json::parse(warm.output);
  EXPECT_EQ(a["ids"], b["ids"]);
  EXPECT_EQ(b["ids"].size(), 16u);
  EXPECT_GT(b["prompt_tokens_per_s"].get<double>(), 0.0);
}

TEST(Cli, StopsAtEos) {
  // qwen2's greedy continuation of its first prompt produces eos id 3 at step 22.
  const std::string qwen = std::string(TOKENMILL_FIXTURES_DIR) + "/hf/qwen2";
  const auto expected = tokenmill::read_json_file(qwen + "/expected.json");
  const int prompt = expected["greedy"][0]["prompt"][0].get<int>();
  const CommandResult r = run_stdout("generate -m " + qwen + " --prompt-ids " + std::to_string(prompt) +
                                     " -n 32 --temperature 0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto out = nlohmann::json::parse(r.output);
  EXPECT_EQ(out["finish_reason"], "stop");
  EXPECT_EQ(out["ids"].size(), 23u);
}

TEST(Cli, UserErrorsAreClearAndNeverCrash) {
  expect_user_error("generate -m " + kLlama, "needs a prompt");
  expect_user_error("generate -m " + kLlama + " --prompt-ids 1,2,9999",
                    "token id 9999 is outside the vocabulary");
  expect_user_error("generate -m " + kLlama + " --prompt-ids 1,x", "--prompt-ids");
  expect_user_error("generate -m " + kLlama + " -p hello", "tokenizer");
  expect_user_error("generate -m /nonexistent --prompt-ids 1", "does not exist");
  expect_user_error("generate -m " + kLlama + " --prompt-ids 1 --temperature -1", "--temperature");
  expect_user_error("generate -m " + kLlama + " --prompt-ids 1 --top-p 1.5", "--top-p");
  expect_user_error("info", "--model is required");
  expect_user_error("info -m " + kLlama + " --bogus", "--bogus");
  expect_user_error("frobnicate", "frobnicate");
  expect_user_error("", "A subcommand is required");
  std::string long_prompt = "1";
  for (int i = 0; i < 200; ++i) long_prompt += ",1";
  expect_user_error("generate -m " + kLlama + " --prompt-ids " + long_prompt, "context holds 128");
}

}  // namespace
