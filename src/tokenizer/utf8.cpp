#include "tokenizer/utf8.h"

namespace tokenmill::utf8 {
namespace {

// For a lead byte: the sequence length (0 if the byte cannot lead) and the allowed range of
// the second byte (Unicode Table 3-7); later bytes are always 80..BF.
struct Lead {
  size_t length;
  unsigned char lo, hi;
};

Lead lead_info(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Number of bytes at `pos` that match the pattern of a well-formed sequence, up to its
// full length; and that full length (0 for an invalid lead).
size_t matched_prefix(std::string_view s, size_t pos, size_t& full) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  const Lead lead = lead_info(b0);
  full = lead.length;
  if (lead.length <= 1) return lead.length;
  size_t n = 1;
  for (; n < lead.length && pos + n < s.size(); ++n) {
    const auto b = static_cast<unsigned char>(s[pos + n]);
    const unsigned char lo = n == 1 ? lead.lo : 0x80;
    const unsigned char hi = n == 1 ? lead.hi : 0xBF;
    if (b < lo || b > hi) break;
  }
  return n;
}

}  // namespace

size_t decode(std::string_view s, size_t pos, char32_t& cp) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  size_t full = 0;
  const size_t n = matched_prefix(s, pos, full);
  if (full == 0 || n != full) return 0;
  char32_t value = b0 & (0x7F >> full);
  for (size_t i = 1; i < full; ++i) value = (value << 6) | (static_cast<unsigned char>(s[pos + i]) & 0x3F);
  cp = value;
  return full;
}

size_t maximal_subpart(std::string_view s, size_t pos) {
  size_t full = 0;
  const size_t n = matched_prefix(s, pos, full);
  return n == 0 ? 1 : n;
}

bool is_valid(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    if (static_cast<unsigned char>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const size_t n = sequence_length(s, pos);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

std::string make_valid(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    if (static_cast<unsigned char>(s[pos]) < 0x80) {
      out.push_back(s[pos++]);
      continue;
    }
    const size_t n = sequence_length(s, pos);
    if (n != 0) {
      out.append(s.substr(pos, n));
      pos += n;
    } else {
      out.append(kReplacement);
      pos += maximal_subpart(s, pos);
    }
  }
  return out;
}

size_t incomplete_tail(std::string_view s) {
  // A proper prefix is at most 3 bytes long: look for its lead byte among the last 3.
  const size_t first = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t pos = s.size(); pos-- > first;) {
    const auto b = static_cast<unsigned char>(s[pos]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t full = 0;
    const size_t n = matched_prefix(s, pos, full);
    const size_t available = s.size() - pos;
    return (full > 1 && n == available && n < full) ? available : 0;
  }
  return 0;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace tokenmill::utf8
