// What `serve --speculative SPEC` asks for:
//   ngram[:N]          prompt lookup (serve/ngram_draft.h), up to N guesses per decode;
//   draft:MODEL[:N]    a draft model's greedy guesses (serve/draft_model.h), MODEL a GGUF
//                      file or Hugging Face directory with the served model's tokenizer;
// N from 1 to 16, default 4.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>

namespace tokenmill {

struct SpeculativeSpec {
  int64_t max_tokens = 4;
  std::filesystem::path draft_model;  // empty: prompt lookup
};

// Throws Error naming what is expected when `spec` is none of the above.
SpeculativeSpec parse_speculative(std::string_view spec);

}  // namespace tokenmill
