// prepare: text / jsonl corpora to token shards for `tokenmill train` (train/prepare.h).
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/tokenizer_flags.h"
#include "train/prepare.h"

namespace tokenmill::cli {

namespace {

struct PrepareFlags {
  TokenizerSource source;
  std::vector<std::string> inputs;
  std::string out;
  double val_fraction = 0.1;
  int64_t shard_tokens = 100'000'000;
  std::string eod_token;
};

void run_prepare(const PrepareFlags& f) {
  const auto start = std::chrono::steady_clock::now();
  const Tokenizer tokenizer = load_tokenizer(f.source);
  PrepareOptions options;
  options.inputs.assign(f.inputs.begin(), f.inputs.end());
  options.out_dir = f.out;
  options.val_fraction = f.val_fraction;
  options.shard_tokens = f.shard_tokens;
  options.eod_token = f.eod_token;
  const PrepareSummary s = prepare_dataset(tokenizer, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print(
      "prepared {} documents: {} train tokens in {} shard(s), {} validation tokens in {} shard(s) -> {} "
      "({:.1f} s)\n",
      s.documents, s.train_tokens, s.train_shards.size(), s.val_tokens, s.val_shards.size(), f.out, seconds);
  if (s.chat_documents > 0)
    fmt::print(
        "{} chat documents: the loss covers their assistant turns ({} train, {} validation tokens scored)\n",
        s.chat_documents, s.train_scored_tokens, s.val_scored_tokens);
}

}  // namespace

void add_prepare_command(CLI::App& app) {
  auto flags = std::make_shared<PrepareFlags>();
  CLI::App* cmd = app.add_subcommand(
      "prepare", "Tokenize text (.txt, .jsonl with \"text\" or chat \"messages\") into training shards");
  add_tokenizer_source(*cmd, flags->source);
  cmd->add_option("--input", flags->inputs,
                  "Input files: .txt (one document each) or .jsonl (\"text\" or \"messages\" per line)")
      ->required();
  cmd->add_option("--out", flags->out, "Output directory (shards + meta.json)")->required();
  cmd->add_option("--val-fraction", flags->val_fraction, "Share of each input's tokens kept for validation");
  cmd->add_option("--shard-tokens", flags->shard_tokens, "Tokens per shard file");
  cmd->add_option("--eod-token", flags->eod_token, "Token joining documents (default: the tokenizer's eos)");
  cmd->callback([flags] { run_prepare(*flags); });
}

}  // namespace tokenmill::cli
