// tokenmill convert / quantize as a user runs them: files written, summaries, clear errors.
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/json_file.h"
#include "support/run_command.h"
#include "support/temp_dir.h"

namespace {

using ::testing::HasSubstr;
using tokenmill::testing::CommandResult;

CommandResult run(const std::string& args) { return tokenmill::testing::run_tokenmill(args); }

const std::string kHf = std::string(TOKENMILL_FIXTURES_DIR) + "/hf";

void expect_user_error(const std::string& args, const std::string& message) {
  const CommandResult r = run(args);
  EXPECT_GT(r.exit_code, 0) << args << "\n" << r.output;
  EXPECT_THAT(r.output, HasSubstr(message)) << args;
}

// Convert, quantize, then generate from the GGUF: greedy ids as transformers' (f32).
TEST(GgufCli, ConvertQuantizeAndGenerate) {
  const tokenmill::testing::TempDir dir;
  const std::string f32 = (dir.path() / "smollm.gguf").string();
  CommandResult r = run("convert " + kHf + "/smollm_chat " + f32 + " --type f32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("20 tensors (f32 20)"));
  ASSERT_TRUE(std::filesystem::exists(f32));

  const std::string q8 = (dir.path() / "smollm-q8_0.gguf").string();
  r = run("quantize " + f32 + " " + q8 + " --type q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("q8_0 15"));
  EXPECT_LT(std::filesystem::file_size(q8), std::filesystem::file_size(f32) / 3);

  const std::string q4k = (dir.path() / "smollm-q4_k.gguf").string();
  r = run("quantize " + kHf + "/smollm_chat " + q4k + " --type q4_k");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("not a multiple of q4_k's block of 256; using q5_0"));  // rows of 64

  const auto expected = tokenmill::read_json_file(kHf + "/smollm_chat/expected.json");
  const auto& greedy = expected["greedy"][1];
  const std::string ids = fmt::format("{}", fmt::join(greedy["prompt"].get<std::vector<int>>(), ","));
  r = tokenmill::testing::run_tokenmill(
      "generate -m " + f32 + " --prompt-ids " + ids + " -n 32 --temperature 0 --ignore-eos --json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["ids"], greedy["ids"]);
}

TEST(GgufCli, UserErrorsAreClear) {
  const tokenmill::testing::TempDir dir;
  const std::string out = (dir.path() / "out.gguf").string();
  expect_user_error("quantize " + kHf + "/llama " + out + " --type q9_0", "--type q9_0: unknown type");
  expect_user_error("quantize " + kHf + "/llama " + out, "--type is required");
  expect_user_error("quantize /nonexistent.gguf " + out + " --type q8_0", "no such file");
  expect_user_error("convert /nonexistent " + out, "not a directory");
  expect_user_error("convert " + kHf + "/llama", "out is required");
  ASSERT_EQ(run("convert " + kHf + "/llama " + out + " --type f16").exit_code, 0);
  expect_user_error("quantize " + out + " " + out + " --type q8_0", "would overwrite the input");
  expect_user_error("quantize " + out + " " + dir.path().string() + " --type q8_0", "is a directory");
  expect_user_error("convert " + kHf + "/llama " + out + " --type q3_k", "unknown type");
  // A file that is not GGUF: the reader's error, no output left behind.
  const auto bogus = dir.write("bogus.gguf", "not a gguf file at all");
  expect_user_error("quantize " + bogus.string() + " " + (dir.path() / "x.gguf").string() + " --type q8_0",
                    "bogus.gguf");
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "x.gguf"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "x.gguf.tmp"));
}

}  // namespace
