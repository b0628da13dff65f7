// Text in, text out through the binary, against what transformers + tokenizers produced
// for the smollm_chat fixture (a tiny Llama with a real byte-level BPE tokenizer and a
// ChatML chat template).
#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/json_file.h"
#include "support/run_command.h"

namespace {

using ::testing::HasSubstr;
using tokenmill::testing::run_tokenmill;

const std::string kModel = std::string(TOKENMILL_FIXTURES_DIR) + "/hf/smollm_chat";

nlohmann::json expected() { return tokenmill::read_json_file(kModel + "/expected.json"); }

// Single-quotes `s` for the shell.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

TEST(TextCli, GenerateFromTextMatchesTransformers) {
  const auto all = expected();
  for (const auto& cse : all["text_prompts"]) {
    const auto r = run_tokenmill(
        "generate -m " + kModel + " -p " + quoted(cse["text"]) + " -n 32 --temperature 0 --ignore-eos --json",
        false);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto out = nlohmann::json::parse(r.output);
    EXPECT_EQ(out["prompt_ids"], cse["ids"]) << cse["text"];
    EXPECT_EQ(out["ids"], cse["greedy_ids"]) << cse["text"];
    EXPECT_EQ(out["text"], cse["greedy_text"]) << cse["text"];
  }
}

TEST(TextCli, StreamedTextEqualsDecodedText) {
  const auto all = expected();
  const auto& cse = all["text_prompts"][1];
  const auto r = run_tokenmill(
      "generate -m " + kModel + " -p " + quoted(cse["text"]) + " -n 32 --temperature 0 --ignore-eos",
      /*with_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, cse["greedy_text"].get<std::string>() + "\n");
}

TEST(TextCli, TokenizeAndDetokenize) {
  const auto all = expected();
  const auto& cse = all["text_prompts"][2];
  auto r = run_tokenmill("tokenize -m " + kModel + " --text " + quoted(cse["text"]) + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto out = nlohmann::json::parse(r.output);
  EXPECT_EQ(out["ids"], cse["ids"]);
  EXPECT_EQ(out["pieces"].size(), cse["ids"].size());

  const std::string ids = fmt::format("{}", fmt::join(cse["ids"].get<std::vector<int>>(), ","));
  r = run_tokenmill("detokenize --tokenizer " + kModel + "/tokenizer.json --ids " + ids, false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, cse["text"].get<std::string>() + "\n");
}

TEST(TextCli, ChatRendersTemplateAndStopsAtEos) {
  const auto chat = expected()["chat"];
  const std::string user = chat["messages"][0]["content"];
  const auto r = run_tokenmill(
      "chat -m " + kModel + " --temperature 0 -n " + std::to_string(chat["max_new_tokens"].get<int>()),
      /*with_stderr=*/false, user + "\n/exit\n");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, chat["greedy_text"].get<std::string>() + "\n");
}

TEST(TextCli, ChatKeepsTheConversationAcrossTurns) {
  // The second turn's prompt contains the first turn: it must still fit and answer.
  const auto r =
      run_tokenmill("chat -m " + kModel + " --temperature 0 -n 8", false, "Hi\nAnd now?\n/reset\nHi\n");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto first_line = r.output.substr(0, r.output.find('\n'));
  const auto last_line = r.output.substr(r.output.rfind('\n', r.output.size() - 2) + 1);
  EXPECT_EQ(first_line + "\n", last_line);  // after /reset, "Hi" gets the same greedy reply
}

TEST(TextCli, TextErrorsAreClear) {
  const std::string no_tokenizer = std::string(TOKENMILL_FIXTURES_DIR) + "/hf/llama";
  auto r = run_tokenmill("generate -m " + no_tokenizer + " -p hello");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("has no tokenizer.json"));
  r = run_tokenmill("chat -m " + no_tokenizer, true, "hi\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("has no tokenizer.json"));
  r = run_tokenmill("tokenize --text hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("-m MODEL_DIR or --tokenizer FILE"));
  r = run_tokenmill("detokenize -m " + kModel + " --ids 1,99999");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("99999"));
  r = run_tokenmill("tokenize -m " + kModel + " --file /nonexistent/file.txt");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("cannot open"));
}

}  // namespace
