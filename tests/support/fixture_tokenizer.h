// The tokenizer of the smollm_chat fixture (a byte-level BPE trained on tinyshakespeare, with
// a ChatML template), loaded once, for tests that need a real tokenizer and no model.
#pragma once

#include <filesystem>

#include "tokenizer/tokenizer.h"

namespace tokenmill::testing {

inline const Tokenizer& smollm_chat_tokenizer() {
  static const Tokenizer t =
      Tokenizer::from_model_dir(std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "hf" / "smollm_chat");
  return t;
}

}  // namespace tokenmill::testing
