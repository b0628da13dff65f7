// UTF-8 helpers for the tokenizer: strict validation (Unicode Table 3-7), lossy repair with
// U+FFFD the way Rust's String::from_utf8_lossy and Python's errors="replace" do it (one
// replacement per maximal invalid subpart), and detection of an incomplete trailing sequence.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tokenmill::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Decodes the sequence at `pos`. Returns its length (1..4) and sets `cp`, or returns 0 if
// the bytes at `pos` do not start a complete, well-formed sequence (pos < s.size()).
size_t decode(std::string_view s, size_t pos, char32_t& cp);

// Length of the well-formed sequence at `pos`, or 0 (see decode).
inline size_t sequence_length(std::string_view s, size_t pos) {
  char32_t cp;
  return decode(s, pos, cp);
}

// Length of the longest prefix at `pos` that could start a well-formed sequence (the
// "maximal subpart"); at least 1 for any byte. Equal to sequence_length when complete.
size_t maximal_subpart(std::string_view s, size_t pos);

bool is_valid(std::string_view s);

// `s` with each maximal invalid subpart replaced by U+FFFD. Returns `s` unchanged if valid.
std::string make_valid(std::string_view s);

// Number of bytes at the end of `s` that form a proper prefix of a well-formed sequence
// (0..3): bytes that may become valid when more bytes arrive.
size_t incomplete_tail(std::string_view s);

void append(std::string& out, char32_t cp);

}  // namespace tokenmill::utf8
