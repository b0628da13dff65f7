// prepare: .txt and .jsonl to shards + meta.json, the validation split arithmetic, and
// malformed input refused with the file and line.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/json_file.h"
#include "support/expect_error.h"
#include "support/run_command.h"
#include "support/temp_dir.h"
#include "train/prepare.h"
#include "train/token_shard.h"

namespace tokenmill {
namespace {

using testing::expect_error;
using testing::TempDir;

const std::filesystem::path kModelDir = std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "hf" / "smollm_chat";
const std::filesystem::path kTokenizer = kModelDir / "tokenizer.json";  // alone: no eos

std::vector<int32_t> all_tokens(const std::vector<std::filesystem::path>& shards) {
  std::vector<int32_t> out;
  for (const auto& p : shards) {
    const TokenShard s(p);
    std::vector<int32_t> t(static_cast<size_t>(s.size()));
    s.read(0, t);
    out.insert(out.end(), t.begin(), t.end());
  }
  return out;
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
  EXPECT_EQ(all_tokens(dataset_shards(opt.out_dir, "train")), train);
  EXPECT_EQ(all_tokens(dataset_shards(opt.out_dir, "val")), val);
  EXPECT_EQ(s.train_tokens, static_cast<int64_t>(train.size()));
  EXPECT_EQ(s.train_shards.size(), (train.size() + 6) / 7);
  const nlohmann::json meta = read_json_file(opt.out_dir / "meta.json");
  EXPECT_EQ(meta["format"], "tokenmill.dataset/1");
  EXPECT_EQ(meta["vocab_size"], tok.vocab_size());
  EXPECT_EQ(meta["eod_token"], eod);
  EXPECT_EQ(meta["val"]["tokens"], val.size());
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
  opt.inputs = {dir.write("chat.jsonl", "{\"messages\": []}\n")};
  expect_error([&] { prepare_dataset(tok, opt); }, {"chat.jsonl:1", "not supported yet"});
  opt.inputs = {dir.path() / "missing.txt"};
  expect_error([&] { prepare_dataset(tok, opt); }, {"missing.txt", "cannot open"});
  opt.inputs = {dir.write("ok.txt", "text")};
  opt.val_fraction = 1.0;
  expect_error([&] { prepare_dataset(tok, opt); }, {"--val-fraction"});
}

TEST(Prepare, DatasetShardsValidatesMeta) {
  const TempDir dir;
  dir.write("meta.json", R"({"format": "other"})");
  expect_error([&] { dataset_shards(dir.path(), "train"); }, {"meta.json", "not a tokenmill dataset"});
  dir.write("meta.json", R"({"format": "tokenmill.dataset/1", "train": {"shards": ["../x"]}})");
  expect_error([&] { dataset_shards(dir.path(), "train"); }, {"plain file name"});
  dir.write("meta.json", R"({"format": "tokenmill.dataset/1"})");
  expect_error([&] { dataset_shards(dir.path(), "val"); }, {"missing \"val\""});
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

}  // namespace
}  // namespace tokenmill
