// TextModel: a model directory loaded with its tokenizer, ready for text in, text out.
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
  std::optional<Tokenizer> tokenizer;  // absent when the directory has no tokenizer.json
  // Generation stops at any of these: the model's generation config and the tokenizer's.
  std::vector<int32_t> eos_token_ids;

  // Loads dir (see Model::load) and dir/tokenizer.json when present. Throws Error if the
  // tokenizer has more tokens than the model's embedding rows.
  static TextModel load(const std::filesystem::path& dir);

  // The tokenizer, or Error "<dir> has no tokenizer.json: <what> needs one".
  const Tokenizer& require_tokenizer(std::string_view what) const;
};

}  // namespace tokenmill
