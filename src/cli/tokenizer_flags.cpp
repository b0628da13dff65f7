#include "cli/tokenizer_flags.h"

#include <filesystem>

#include "core/error.h"

namespace tokenmill::cli {

void add_tokenizer_source(CLI::App& cmd, TokenizerSource& source) {
  auto* model = cmd.add_option("-m,--model", source.model_dir,
                               "Model directory with a tokenizer.json, or a GGUF model");
  auto* file = cmd.add_option("--tokenizer", source.tokenizer_file, "A tokenizer.json or a .gguf file");
  model->excludes(file);
}

Tokenizer load_tokenizer(const TokenizerSource& source) {
  if (source.model_dir.empty() && source.tokenizer_file.empty())
    fail("give the tokenizer: -m MODEL_DIR or --tokenizer FILE (tokenizer.json or .gguf)");
  if (!source.model_dir.empty() && !std::filesystem::is_regular_file(source.model_dir))
    return Tokenizer::from_model_dir(source.model_dir);
  return Tokenizer::from_file(source.model_dir.empty() ? source.tokenizer_file : source.model_dir);
}

}  // namespace tokenmill::cli
