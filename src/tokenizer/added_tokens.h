// AddedTokenMatcher: finds added tokens (special or not) in raw text before the normalizer
// and the BPE model see it, leftmost-longest as HF's AddedVocabulary does. Special tokens
// are matched only when the caller asks for it (parse_special); non-special added tokens
// are always matched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_spec.h"

namespace tokenmill {

class AddedTokenMatcher {
 public:
  explicit AddedTokenMatcher(const std::vector<AddedTokenSpec>& tokens);

  // [begin, end) of the input: an added token (id >= 0) or plain text (id == -1).
  struct Piece {
    size_t begin;
    size_t end;
    int32_t id;
  };

  // Splits `text` (valid UTF-8) into plain-text pieces and added tokens. An lstrip/rstrip
  // token's piece includes the whitespace it swallows. Empty plain pieces are omitted.
  void split(std::string_view text, bool parse_special, std::vector<Piece>& out) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t token = -1;                                       // index into tokens_
  };
  int32_t child(int32_t node, unsigned char byte) const;
  // Longest allowed token starting at `pos`: its index into tokens_ and its length.
  bool longest_match(std::string_view text, size_t pos, bool parse_special, int32_t& token,
                     size_t& length) const;

  std::vector<AddedTokenSpec> tokens_;
  std::vector<Node> nodes_;
  bool first_byte_[256] = {};
  bool has_special_ = false;
  bool has_plain_ = false;
};

}  // namespace tokenmill
