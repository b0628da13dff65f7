#include "tokenizer/added_tokens.h"

#include <algorithm>

#include <unicode/uchar.h>

#include "tokenizer/normalizer.h"
#include "tokenizer/utf8.h"

namespace tokenmill {
namespace {

// Rust's char::is_alphanumeric: Alphabetic or a numeric category.
bool is_alphanumeric(char32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z');
  const auto c = static_cast<UChar32>(cp);
  if (u_hasBinaryProperty(c, UCHAR_ALPHABETIC)) return true;
  const int8_t type = u_charType(c);
  return type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER || type == U_OTHER_NUMBER;
}

size_t previous_char_start(std::string_view text, size_t pos) {
  size_t p = pos - 1;
  while (p > 0 && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
  return p;
}

char32_t char_at(std::string_view text, size_t pos, size_t& length) {
  char32_t cp = 0;
  length = utf8::decode(text, pos, cp);
  if (length == 0) {
    length = 1;
    return 0xFFFD;
  }
  return cp;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedTokenSpec>& tokens) : tokens_(tokens) {
  nodes_.emplace_back();
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const std::string& content = tokens_[i].content;
    if (content.empty()) continue;
    int32_t node = 0;
    for (const char c : content) {
      const auto byte = static_cast<unsigned char>(c);
      int32_t next = child(node, byte);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        auto& children = nodes_[node].children;
        children.insert(std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{-1})),
                        {byte, next});
        nodes_.emplace_back();
      }
      node = next;
    }
    // With duplicate contents the first token wins (a special and a plain duplicate keep
    // the first one's rules).
    if (nodes_[node].token < 0) nodes_[node].token = static_cast<int32_t>(i);
    first_byte_[static_cast<unsigned char>(content[0])] = true;
    (tokens_[i].special ? has_special_ : has_plain_) = true;
  }
}

int32_t AddedTokenMatcher::child(int32_t node, unsigned char byte) const {
  const auto& children = nodes_[node].children;
  auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{-1}));
  return it != children.end() && it->first == byte ? it->second : -1;
}

bool AddedTokenMatcher::longest_match(std::string_view text, size_t pos, bool parse_special, int32_t& token,
                                      size_t& length) const {
  int32_t node = 0;
  bool found = false;
  for (size_t i = pos; i < text.size(); ++i) {
    node = child(node, static_cast<unsigned char>(text[i]));
    if (node < 0) break;
    const int32_t t = nodes_[node].token;
    if (t >= 0 && (parse_special || !tokens_[t].special)) {
      token = t;
      length = i + 1 - pos;
      found = true;
    }
  }
  return found;
}

void AddedTokenMatcher::split(std::string_view text, bool parse_special, std::vector<Piece>& out) const {
  out.clear();
  size_t plain_start = 0;
  const bool active = has_plain_ || (parse_special && has_special_);
  size_t pos = 0;
  while (active && pos < text.size()) {
    int32_t token = -1;
    size_t length = 0;
    if (!first_byte_[static_cast<unsigned char>(text[pos])] ||
        !longest_match(text, pos, parse_special, token, length)) {
      ++pos;
      continue;
    }
    const AddedTokenSpec& spec = tokens_[token];
    size_t start = pos, stop = pos + length;
    if (spec.single_word) {
      size_t n = 0;
      const bool word_before =
          start > 0 && is_alphanumeric(char_at(text, previous_char_start(text, start), n));
      const bool word_after = stop < text.size() && is_alphanumeric(char_at(text, stop, n));
      if (word_before || word_after) {
        pos = stop;
        continue;
      }
    }
    if (spec.lstrip) {
      while (start > plain_start) {
        size_t n = 0;
        const size_t p = previous_char_start(text, start);
        if (!is_unicode_whitespace(char_at(text, p, n))) break;
        start = p;
      }
    }
    if (spec.rstrip) {
      while (stop < text.size()) {
        size_t n = 0;
        if (!is_unicode_whitespace(char_at(text, stop, n))) break;
        stop += n;
      }
    }
    if (start > plain_start) out.push_back({plain_start, start, -1});
    out.push_back({start, stop, spec.id});
    plain_start = pos = stop;
  }
  if (plain_start < text.size()) out.push_back({plain_start, text.size(), -1});
}

}  // namespace tokenmill
