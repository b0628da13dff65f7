// TextModel: a model (directory or GGUF file) loaded with its tokenizer, ready for text
// in, text out.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tokenmill {

struct TextModel {
  std::unique_ptr<Model> model;
  std::optional<Tokenizer> tokenizer;  // absent when the model has no tokenizer
  // Generation stops at any of these: the model's generation config and the tokenizer's.
  std::vector<int32_t> eos_token_ids;

  // Loads `path` (see Model::load) and its tokenizer when present: dir/tokenizer.json, or
  // a GGUF file's tokenizer.ggml.* metadata. Throws Error if the tokenizer has more
  // tokens than the model's embedding rows.
  static TextModel load(const std::filesystem::path& path);

  // The tokenizer, or Error "<path> has no tokenizer.json: <what> needs one" (or no
  // tokenizer.ggml.* metadata, for a GGUF file).
  const Tokenizer& require_tokenizer(std::string_view what) const;

  // The ids generation may choose (SamplingParams::vocab_limit): the tokenizer's, which may
  // be fewer than the model's embedding rows; 0 (no limit) without a tokenizer.
  int64_t sampling_vocab_limit() const { return tokenizer ? tokenizer->vocab_size() : 0; }
};

}  // namespace tokenmill
