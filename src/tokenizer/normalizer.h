// Normalizer: the text rewrites applied to each piece of input between added tokens
// (HF normalizers Prepend, Replace, NFC/NFD/NFKC/NFKD, Lowercase, Strip, in sequence).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/tokenizer_spec.h"

namespace tokenmill {

class Normalizer {
 public:
  explicit Normalizer(const std::vector<NormalizerSpec>& steps);

  bool empty() const { return steps_.empty(); }
  // `text` is valid UTF-8; so is the result.
  std::string apply(std::string_view text) const;

 private:
  struct Step {
    NormalizerSpec spec;
    std::vector<Regex> regex;  // Replace: one compiled pattern
  };
  std::vector<Step> steps_;
};

// Unicode helpers shared by the tokenizer (ICU underneath).
bool is_unicode_whitespace(char32_t cp);  // Rust's char::is_whitespace (White_Space)

}  // namespace tokenmill
