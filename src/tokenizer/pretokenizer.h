// PreTokenizer: splits normalized text into words for the BPE model, following the HF
// pre-tokenizers (Split, ByteLevel, Metaspace, Digits, Punctuation, in sequence). Each
// step works on every piece the previous step produced; empty pieces are dropped.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/tokenizer_spec.h"

namespace tokenmill {

// Words as spans of one buffer. `at_origin` marks a piece that starts where the input text
// starts (Metaspace's prepend_scheme "first" looks at it).
struct Pieces {
  struct Span {
    size_t begin;
    size_t end;
    bool at_origin;
  };
  std::string text;
  std::vector<Span> spans;

  std::string_view view(const Span& s) const {
    return std::string_view(text).substr(s.begin, s.end - s.begin);
  }
};

// The GPT-2 pre-tokenizer regex (HF ByteLevel's use_regex).
extern const char* const kGpt2Pattern;

class PreTokenizer {
 public:
  explicit PreTokenizer(const std::vector<PreTokenizerSpec>& steps);

  // Splits `text` (valid UTF-8). `at_origin`: `text` starts at the start of the input.
  // `scratch` is reused between calls to save allocations.
  void split(std::string_view text, bool at_origin, Pieces& out, Pieces& scratch) const;

 private:
  struct Step {
    PreTokenizerSpec spec;
    std::vector<Regex> regex;  // Split/Digits/Punctuation: the pattern; ByteLevel: GPT-2's
  };
  void apply(const Step& step, const Pieces& in, Pieces& out) const;
  std::vector<Step> steps_;
};

}  // namespace tokenmill
