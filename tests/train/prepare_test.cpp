// prepare: .txt and .jsonl to shards + meta.json, the validation split arithmetic, chat
// ("messages") records with their loss mask next to text, malformed input refused with the
// file and line, and `prepare` + `train` on chat data through the CLI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/json_file.h"
#include "formats/token_shard.h"
#include "support/expect_error.h"
#include "support/run_command.h"
#include "support/temp_dir.h"
#include "train/chat_sft.h"
#include "train/dataset_meta.h"
#include "train/prepare.h"

namespace tokenmill {
namespace {

using testing::expect_error;
using testing::TempDir;

const std::filesystem::path kModelDir = std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "hf" / "smollm_chat";
const std::filesystem::path kTokenizer = kModelDir / "tokenizer.json";  // alone: no eos

// Every token of `shards`, in order, and whether each is scored.
struct ShardContents {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> scored;
};
ShardContents read_shards(const std::vector<std::filesystem::path>& shards) {
  ShardContents out;
  for (const auto& p : shards) {
    const TokenShard s(p);
    std::vector<int32_t> t(static_cast<size_t>(s.size()));
    std::vector<uint8_t> m(t.size());
    s.read(0, t);
    s.read_scored(0, m);
    out.tokens.insert(out.tokens.end(), t.begin(), t.end());
    out.scored.insert(out.scored.end(), m.begin(), m.end());
  }
  return out;
}
std::vector<int32_t> all_tokens(const std::vector<std::filesystem::path>& shards) {
  return read_shards(shards).tokens;
}

TEST(Prepare, SplitsEachInputAndRecordsMeta) {
  const TempDir dir;
  const Tokenizer tok = Tokenizer::from_model_dir(kModelDir);
  ASSERT_TRUE(tok.eos_id().has_value());
  const int32_t eod = *tok.eos_id();
  const std::string text = "First Citizen:\nBefore we proceed any further, hear me speak.\n";
  const auto txt = dir.write("a.txt", text);
  const auto jsonl =
      dir.write("b.jsonl", "{\"text\": \"All: Speak, speak.\"}\n\n{\"text\": \"You are all resolved.\"}\n");
  PrepareOptions opt;
  opt.inputs = {txt, jsonl};
  opt.out_dir = dir.path() / "data";
  opt.val_fraction = 0.25;
  opt.shard_tokens = 7;  // several shards
  const PrepareSummary s = prepare_dataset(tok, opt);

  EncodeOptions plain;
  plain.add_special_tokens = false;
  std::vector<int32_t> a = tok.encode(text, plain), b = tok.encode("All: Speak, speak.", plain),
                       c = tok.encode("You are all resolved.", plain);
  a.push_back(eod);
  b.push_back(eod);
  b.insert(b.end(), c.begin(), c.end());
  b.push_back(eod);
  const auto val_a = static_cast<size_t>(std::ceil(0.25 * static_cast<double>(a.size())));
  const auto val_b = static_cast<size_t>(std::ceil(0.25 * static_cast<double>(b.size())));
  std::vector<int32_t> train(a.begin(), a.end() - static_cast<std::ptrdiff_t>(val_a));
  train.insert(train.end(), b.begin(), b.end() - static_cast<std::ptrdiff_t>(val_b));
  std::vector<int32_t> val(a.end() - static_cast<std::ptrdiff_t>(val_a), a.end());
  val.insert(val.end(), b.end() - static_cast<std::ptrdiff_t>(val_b), b.end());

  EXPECT_EQ(s.documents, 3);
  EXPECT_EQ(all_tokens(read_dataset_meta(opt.out_dir).train_shards), train);
  EXPECT_EQ(all_tokens(read_dataset_meta(opt.out_dir).val_shards), val);
  EXPECT_EQ(s.train_tokens, static_cast<int64_t>(train.size()));
  EXPECT_EQ(s.train_shards.size(), (train.size() + 6) / 7);
  const nlohmann::json meta = read_json_file(opt.out_dir / "meta.json");
  EXPECT_EQ(meta["format"], "tokenmill.dataset/1");
  EXPECT_EQ(meta["vocab_size"], tok.vocab_size());
  EXPECT_EQ(meta["eod_token"], eod);
  EXPECT_EQ(meta["val"]["tokens"], val.size());
  EXPECT_EQ(meta["loss_mask"], false);
  for (const auto& shard : read_dataset_meta(opt.out_dir).train_shards)
    EXPECT_FALSE(TokenShard(shard).info().loss_mask);
}

TEST(Prepare, RefusesBadInputWithFileAndLine) {
  const TempDir dir;
  const Tokenizer tok = Tokenizer::from_file(kTokenizer);
  PrepareOptions opt;
  opt.out_dir = dir.path() / "out";
  expect_error([&] { prepare_dataset(tok, opt); }, {"no input files"});
  opt.inputs = {dir.write("ok.txt", "text")};
  expect_error([&] { prepare_dataset(tok, opt); }, {"no eos token", "--eod-token"});
  opt.eod_token = "<|nonexistent|>";
  expect_error([&] { prepare_dataset(tok, opt); }, {"--eod-token", "<|nonexistent|>"});
  opt.eod_token = "<|endoftext|>";
  opt.inputs = {dir.write("bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": 3}\n")};
  expect_error([&] { prepare_dataset(tok, opt); }, {"bad.jsonl:2", "\"text\" string"});
  opt.inputs = {dir.write("bad2.jsonl", "{\"text\": \"ok\"\n")};
  expect_error([&] { prepare_dataset(tok, opt); }, {"bad2.jsonl:1", "not valid JSON"});
  opt.inputs = {dir.write("both.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"a\", \"messages\": []}\n")};
  expect_error([&] { prepare_dataset(tok, opt); },
               {"both.jsonl:2", "either a \"text\" string or a \"messages\""});
  opt.inputs = {dir.write("neither.jsonl", "{\"txt\": \"a\"}\n")};
  expect_error([&] { prepare_dataset(tok, opt); }, {"neither.jsonl:1", "either a \"text\""});
  opt.inputs = {dir.write("chat.jsonl", "\n{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}\n")};
  expect_error([&] { prepare_dataset(tok, opt); },
               {"chat.jsonl:2", "needs a chat template", "tokenizer.json"});
  opt.inputs = {dir.path() / "missing.txt"};
  expect_error([&] { prepare_dataset(tok, opt); }, {"missing.txt", "cannot open"});
  opt.inputs = {dir.write("ok.txt", "text")};
  opt.val_fraction = 1.0;
  expect_error([&] { prepare_dataset(tok, opt); }, {"--val-fraction"});
}

TEST(Prepare, ChatRecordsScoreTheirAssistantTurns) {
  const TempDir dir;
  const Tokenizer tok = Tokenizer::from_model_dir(kModelDir);
  const int32_t eod = *tok.eos_id();
  const nlohmann::json messages = {{{"role", "system"}, {"content", "Be brief."}},
                                   {{"role", "user"}, {"content", "Speak."}},
                                   {{"role", "assistant"}, {"content", "Speak, speak."}}};
  const auto jsonl = dir.write(
      "mixed.jsonl", "{\"text\": \"All: Speak.\"}\n" + nlohmann::json{{"messages", messages}}.dump() + "\n");
  PrepareOptions opt;
  opt.inputs = {jsonl};
  opt.out_dir = dir.path() / "data";
  opt.val_fraction = 0.0;
  opt.shard_tokens = 10;  // the text document's shard gets a mask only where chat tokens share it
  const PrepareSummary s = prepare_dataset(tok, opt);

  std::vector<int32_t> tokens = tok.encode("All: Speak.", {.add_special_tokens = false});
  tokens.push_back(eod);
  std::vector<uint8_t> scored(tokens.size(), 1);
  const ChatDocument chat =
      ChatSftEncoder::from_tokenizer(tok, "test").encode(parse_chat_messages(messages, "test"), "test");
  tokens.insert(tokens.end(), chat.tokens.begin(), chat.tokens.end());
  tokens.push_back(eod);
  scored.insert(scored.end(), chat.scored.begin(), chat.scored.end());
  scored.push_back(0);
  const auto shards = read_dataset_meta(opt.out_dir).train_shards;
  const ShardContents contents = read_shards(shards);
  EXPECT_EQ(contents.tokens, tokens);
  EXPECT_EQ(contents.scored, scored);
  for (size_t i = 0; i < shards.size(); ++i) {
    const auto first = scored.begin() + static_cast<std::ptrdiff_t>(10 * i);
    const auto last = scored.begin() + static_cast<std::ptrdiff_t>(std::min(scored.size(), 10 * i + 10));
    EXPECT_EQ(TokenShard(shards[i]).info().loss_mask, std::find(first, last, 0) != last) << i;
  }
  const auto n_scored = std::count(scored.begin(), scored.end(), 1);
  EXPECT_EQ(s.documents, 2);
  EXPECT_EQ(s.chat_documents, 1);
  EXPECT_EQ(s.train_scored_tokens, n_scored);
  const nlohmann::json meta = read_json_file(opt.out_dir / "meta.json");
  EXPECT_EQ(meta["loss_mask"], true);
  EXPECT_EQ(meta["chat_documents"], 1);
  EXPECT_EQ(meta["train"]["scored_tokens"], n_scored);
}

TEST(Prepare, DatasetMetaIsValidatedFieldByField) {
  const TempDir dir;
  const auto meta = [&](const std::string& fields) {
    dir.write("meta.json", R"({"format": "tokenmill.dataset/1", )" + fields + "}");
  };
  const std::string shards = R"("train": {"shards": ["a.bin"]}, "val": {"shards": []})";
  dir.write("meta.json", R"({"format": "other"})");
  expect_error([&] { read_dataset_meta(dir.path()); }, {"meta.json", "not a tokenmill dataset"});
  dir.write("meta.json", R"({"format": ["tokenmill.dataset/1"]})");  // found by the fuzz target
  expect_error([&] { read_dataset_meta(dir.path()); }, {"meta.json", "not a tokenmill dataset"});
  meta(R"("vocab_size": 10, "eod_token": 2, )" + shards);
  expect_error([&] { read_dataset_meta(dir.path()); }, {"meta.json", "missing \"tokenizer\""});
  meta(R"("tokenizer": "/t.json", "vocab_size": "10", "eod_token": 2, )" + shards);
  expect_error([&] { read_dataset_meta(dir.path()); }, {"\"vocab_size\" must be an integer"});
  meta(R"("tokenizer": "/t.json", "vocab_size": 10, "eod_token": 10, )" + shards);
  expect_error([&] { read_dataset_meta(dir.path()); }, {"\"eod_token\" must be an integer in [0, 9]"});
  meta(
      R"("tokenizer": "/t.json", "vocab_size": 10, "eod_token": 2, "train": {"shards": ["../x"]}, "val": {"shards": []})");
  expect_error([&] { read_dataset_meta(dir.path()); }, {"plain file name"});
  meta(R"("tokenizer": "/t.json", "vocab_size": 10, "eod_token": 2, "train": {"shards": []})");
  expect_error([&] { read_dataset_meta(dir.path()); }, {"missing \"val\""});
  meta(R"("tokenizer": "/t.json", "vocab_size": 10, "eod_token": 2, )" + shards);
  const DatasetMeta m = read_dataset_meta(dir.path());
  EXPECT_EQ(m.tokenizer, "/t.json");
  EXPECT_EQ(m.vocab_size, 10);
  EXPECT_EQ(m.eod_token, 2);
  EXPECT_EQ(m.train_shards, std::vector<std::filesystem::path>{dir.path() / "a.bin"});
  EXPECT_TRUE(m.val_shards.empty());
}

TEST(PrepareCommand, WritesShardsAndSummarises) {
  const TempDir dir;
  const auto txt = dir.write("a.txt", "Speak, speak. You are all resolved rather to die than to famish?");
  const auto r = testing::run_tokenmill("prepare -m " + kModelDir.string() + " --input " + txt.string() +
                                        " --out " + (dir.path() / "d").string() + " --val-fraction 0.2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("prepared 1 documents"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "d" / "train_000.tmshard"));
  const auto bad =
      testing::run_tokenmill("prepare --input " + txt.string() + " --out " + dir.path().string());
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("give the tokenizer"), std::string::npos) << bad.output;
}

TEST(PrepareCommand, ChatDataPreparesAndTrains) {
  const TempDir dir;
  std::string lines;
  for (int i = 0; i < 12; ++i)
    lines +=
        nlohmann::json{
            {"messages",
             {{{"role", "user"}, {"content", "Speak " + std::to_string(i) + "."}},
              {{"role", "assistant"}, {"content", "You are all resolved rather to die than to famish?"}}}}}
            .dump() +
        "\n";
  const auto jsonl = dir.write("chat.jsonl", lines);
  const std::string data = (dir.path() / "data").string();
  const auto prepared = testing::run_tokenmill("prepare -m " + kModelDir.string() + " --input " +
                                               jsonl.string() + " --out " + data + " --val-fraction 0.25");
  ASSERT_EQ(prepared.exit_code, 0) << prepared.output;
  EXPECT_NE(prepared.output.find("12 chat documents: the loss covers their assistant turns"),
            std::string::npos)
      << prepared.output;
  EXPECT_EQ(read_json_file(dir.path() / "data" / "meta.json")["loss_mask"], true);
  const auto trained =
      testing::run_tokenmill("-t 1 train --data " + data + " --out " + (dir.path() / "run").string() +
                             " --layers 1 --hidden 32 --heads 2 --batch 2 --seq-len 16 --steps 2"
                             " --eval-every 2 --eval-batches 1 --sample-tokens 4");
  EXPECT_EQ(trained.exit_code, 0) << trained.output;
  for (const char* part : {"step     2/2 | loss", "eval step     2 | val loss"})
    EXPECT_NE(trained.output.find(part), std::string::npos) << "missing: " << part << "\n" << trained.output;
  // Every step's loss (over the assistant tokens only) is a finite cross-entropy.
  std::istringstream metrics(dir.read("run/metrics.jsonl"));
  int losses = 0;
  for (std::string line; std::getline(metrics, line);) {
    const nlohmann::json m = nlohmann::json::parse(line);
    if (!m.contains("loss")) continue;
    EXPECT_TRUE(m["loss"].is_number() && std::isfinite(m["loss"].get<double>()) &&
                m["loss"].get<double>() > 0)
        << line;
    ++losses;
  }
  EXPECT_EQ(losses, 2);
}

}  // namespace
}  // namespace tokenmill
