// `tokenmill prepare`: text corpora to token shards (formats/token_shard.h) plus meta.json.
//
// Inputs: .txt files (each file one document) and .jsonl files (one JSON object per line,
// one document per line; blank lines skipped) whose lines have either a "text" string or a
// "messages" array of {"role": "system"|"user"|"assistant", "content"} (chat/SFT data; a line
// with both or neither is an error). Text is encoded without special tokens, every token
// scored. A "messages" record is rendered through the tokenizer's chat template and only its
// assistant turns (content + the template's end-of-turn) are scored (train/chat_sft.h). Every
// document is followed by the end-of-document token (the tokenizer's eos, or the token named
// by eod_token), scored after text, not after a chat record. A shard holding an unscored
// token carries the loss mask (formats/token_shard.h); the loader turns those targets into -1.
// Split: of each input file's token stream, the last ceil(val_fraction * tokens) tokens go to
// validation, the rest to training (so a single text still gets a validation tail, and a
// jsonl's last documents form it). Memory holds one input file's
// tokens at a time; shards are cut every `shard_tokens` tokens.
//
// Output directory: train_000.tmshard, ..., val_000.tmshard, ... and meta.json
// {"format": "tokenmill.dataset/1", "tokenizer", "vocab_size", "eod_token", "documents",
//  "chat_documents", "loss_mask" (whether any shard carries a mask), "inputs", "val_fraction",
//  "train": {"tokens", "scored_tokens", "shards"}, "val": {...the same}}. Every file is
// written atomically; an existing meta.json in the directory is replaced only at the end.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace tokenmill {

struct PrepareOptions {
  std::vector<std::filesystem::path> inputs;
  std::filesystem::path out_dir;
  double val_fraction = 0.1;  // in [0, 1)
  int64_t shard_tokens = 100'000'000;
  std::string eod_token;  // the token text joining documents; empty: the tokenizer's eos
};

struct PrepareSummary {
  int64_t documents = 0;
  int64_t chat_documents = 0;  // of documents, the "messages" records
  int64_t train_tokens = 0, val_tokens = 0;
  int64_t train_scored_tokens = 0, val_scored_tokens = 0;
  std::vector<std::string> train_shards, val_shards;  // file names inside out_dir
};

// Throws Error naming the file (and line, for jsonl) on unreadable or malformed input (a chat
// record without a chat template or with a template that is not prefix-stable included), no
// end-of-document token (neither an eos nor a known eod_token), or options out of range.
PrepareSummary prepare_dataset(const Tokenizer& tokenizer, const PrepareOptions& options);

}  // namespace tokenmill
