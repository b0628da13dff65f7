// The "which tokenizer" flags shared by tokenize, detokenize and prepare:
// -m MODEL (a model directory with tokenizer.json, or a GGUF) or --tokenizer FILE.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "tokenizer/tokenizer.h"

namespace tokenmill::cli {

struct TokenizerSource {
  std::string model_dir;
  std::string tokenizer_file;
};

void add_tokenizer_source(CLI::App& cmd, TokenizerSource& source);
// Throws Error if neither flag was given.
Tokenizer load_tokenizer(const TokenizerSource& source);

}  // namespace tokenmill::cli
