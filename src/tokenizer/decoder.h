// Decoder: turns token strings back into text with HF's decoder chain semantics (ByteLevel,
// Metaspace, Replace, ByteFallback, Fuse, Strip; each step maps the list of token strings
// to a new list, and the result is their concatenation). The result is valid UTF-8, unless
// raw bytes are asked for: then byte tokens that do not form whole characters are kept as
// they are (what OpenAI's logprobs `bytes` report for a token holding part of a character).
// Two steps treat the start of the text specially: Strip's `start` once the tokens are joined
// (by Fuse or ByteLevel) into the whole text, and Metaspace's first token (while not joined);
// decoding tokens that continue a text (streaming) leaves those rules out.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/tokenizer_spec.h"

namespace tokenmill {

// Where the decoded tokens sit: at the start of the text, or continuing text before them.
enum class DecodeAt { Start, Continuation };

class Decoder {
 public:
  Decoder(const std::vector<DecoderSpec>& steps, bool join_with_space);

  std::string decode(std::vector<std::string> tokens, bool raw_bytes = false,
                     DecodeAt at = DecodeAt::Start) const;

 private:
  std::vector<DecoderSpec> steps_;
  bool join_with_space_;
};

}  // namespace tokenmill
