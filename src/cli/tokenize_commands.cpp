// tokenize / detokenize: the tokenizer of a model directory, a tokenizer.json or a GGUF.
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/tokenizer_flags.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace tokenmill::cli {

namespace {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("--file: cannot open '{}'", path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

struct TokenizeFlags {
  TokenizerSource source;
  std::string text, file;
  bool no_bos = false, parse_special = false, json = false;
};

void run_tokenize(const TokenizeFlags& f) {
  const Tokenizer tokenizer = load_tokenizer(f.source);
  const std::string text = f.file.empty() ? f.text : read_text_file(f.file);
  const std::vector<int32_t> ids =
      tokenizer.encode(text, {.add_special_tokens = !f.no_bos, .parse_special = f.parse_special});
  if (f.json) {
    nlohmann::json pieces = nlohmann::json::array();
    for (int32_t id : ids) pieces.push_back(tokenizer.piece(id));
    fmt::print("{}\n", nlohmann::json{{"ids", ids}, {"pieces", pieces}}.dump(
                           -1, ' ', false, nlohmann::json::error_handler_t::replace));
    return;
  }
  for (int32_t id : ids)
    fmt::print(
        "{:>8} {}\n", id,
        nlohmann::json(tokenizer.piece(id)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  fmt::print(stderr, "[{} tokens]\n", ids.size());
}

struct DetokenizeFlags {
  TokenizerSource source;
  std::vector<int32_t> ids;
  bool skip_special = false;
};

}  // namespace

void add_tokenize_commands(CLI::App& app) {
  auto* tokenize = app.add_subcommand("tokenize", "Text to token ids and pieces");
  auto tf = std::make_shared<TokenizeFlags>();
  add_tokenizer_source(*tokenize, tf->source);
  auto* text = tokenize->add_option("--text", tf->text, "The text");
  auto* file = tokenize->add_option("--file", tf->file, "Read the text from a file");
  text->excludes(file);
  tokenize->add_flag("--no-bos", tf->no_bos, "Leave out the BOS/EOS the tokenizer config would add");
  tokenize->add_flag("--parse-special", tf->parse_special, "Recognise special tokens written in the text");
  tokenize->add_flag("--json", tf->json, "Print {\"ids\": [...], \"pieces\": [...]}");
  tokenize->callback([tf, text, file] {
    if (text->count() == 0 && file->count() == 0) fail("tokenize needs --text TEXT or --file PATH");
    run_tokenize(*tf);
  });

  auto* detokenize = app.add_subcommand("detokenize", "Token ids to text");
  auto df = std::make_shared<DetokenizeFlags>();
  add_tokenizer_source(*detokenize, df->source);
  detokenize->add_option("--ids", df->ids, "Token ids: 1,2,3")->delimiter(',')->required();
  detokenize->add_flag("--skip-special", df->skip_special, "Leave out special tokens");
  detokenize->callback(
      [df] { fmt::print("{}\n", load_tokenizer(df->source).decode(df->ids, df->skip_special)); });
}

}  // namespace tokenmill::cli
