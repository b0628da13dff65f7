#include "tokenizer/jinja_unicode.h"

#include <algorithm>

namespace tokenmill::jinja {
namespace {

constexpr char32_t kEscapeBase = 0xDC00;  // lone surrogate U+DC80..U+DCFF <-> raw byte 0x80..0xFF

bool is_continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

bool in(char32_t cp, char32_t lo, char32_t hi) { return cp >= lo && cp <= hi; }

// Simple (one to one) case mappings for the scripts we cover; identity elsewhere.
char32_t simple_lower(char32_t c) {
  if (in(c, 'A', 'Z')) return c + 32;
  if (c < 0x80) return c;
  if (in(c, 0xC0, 0xDE) && c != 0xD7) return c + 32;
  if (in(c, 0x100, 0x137) && c % 2 == 0 && c != 0x130) return c + 1;
  if (in(c, 0x139, 0x148) && c % 2 == 1) return c + 1;
  if (in(c, 0x14A, 0x177) && c % 2 == 0) return c + 1;
  if (c == 0x178) return 0xFF;
  if (in(c, 0x179, 0x17E) && c % 2 == 1) return c + 1;
  if (c == 0x386) return 0x3AC;
  if (in(c, 0x388, 0x38A)) return c + 37;
  if (c == 0x38C) return 0x3CC;
  if (in(c, 0x38E, 0x38F)) return c + 63;
  if (in(c, 0x391, 0x3AB) && c != 0x3A2) return c + 32;
  if (in(c, 0x400, 0x40F)) return c + 80;
  if (in(c, 0x410, 0x42F)) return c + 32;
  if ((in(c, 0x460, 0x481) || in(c, 0x48A, 0x4BF)) && c % 2 == 0) return c + 1;
  if (in(c, 0xFF21, 0xFF3A)) return c + 32;
  return c;
}

char32_t simple_upper(char32_t c) {
  if (in(c, 'a', 'z')) return c - 32;
  if (c < 0x80) return c;
  if (c == 0xB5) return 0x39C;
  if (in(c, 0xE0, 0xFE) && c != 0xF7) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c == 0x131) return 'I';
  if (in(c, 0x101, 0x137) && c % 2 == 1) return c - 1;
  if (in(c, 0x13A, 0x148) && c % 2 == 0) return c - 1;
  if (in(c, 0x14B, 0x177) && c % 2 == 1) return c - 1;
  if (in(c, 0x17A, 0x17E) && c % 2 == 0) return c - 1;
  if (c == 0x17F) return 'S';
  if (c == 0x3AC) return 0x386;
  if (in(c, 0x3AD, 0x3AF)) return c - 37;
  if (c == 0x3CC) return 0x38C;
  if (in(c, 0x3CD, 0x3CE)) return c - 63;
  if (c == 0x3C2) return 0x3A3;
  if (in(c, 0x3B1, 0x3CB)) return c - 32;
  if (in(c, 0x430, 0x44F)) return c - 32;
  if (in(c, 0x450, 0x45F)) return c - 80;
  if ((in(c, 0x461, 0x481) || in(c, 0x48B, 0x4BF)) && c % 2 == 1) return c - 1;
  if (in(c, 0xFF41, 0xFF5A)) return c - 32;
  return c;
}

// Characters Unicode calls "case-ignorable" that matter for the final-sigma rule.
bool is_case_ignorable(char32_t c) {
  switch (c) {
    case '\'':
    case '.':
    case ':':
    case '^':
    case '`':
    case 0xA8:
    case 0xAD:
    case 0xAF:
    case 0xB4:
    case 0xB7:
    case 0xB8:
    case 0x2018:
    case 0x2019:
    case 0x2024:
    case 0x2027: return true;
    default: return in(c, 0x300, 0x36F);
  }
}

void append_upper_full(std::string& out, char32_t c) {
  if (c == 0xDF) {
    out += "SS";
  } else if (c == 0x149) {
    append_utf8(out, 0x2BC);
    out += 'N';
  } else {
    append_utf8(out, simple_upper(c));
  }
}

void append_title_full(std::string& out, char32_t c) {
  if (c == 0xDF) {
    out += "Ss";
  } else {
    append_upper_full(out, c);
  }
}

// Final sigma: Σ lowercases to ς after a cased letter when no cased letter follows.
bool is_final_sigma(const std::vector<char32_t>& cps, std::size_t i) {
  std::size_t j = i;
  bool cased_before = false;
  while (j > 0) {
    --j;
    if (is_case_ignorable(cps[j])) continue;
    cased_before = is_cased(cps[j]);
    break;
  }
  if (!cased_before) return false;
  for (std::size_t k = i + 1; k < cps.size(); ++k) {
    if (is_case_ignorable(cps[k])) continue;
    return !is_cased(cps[k]);
  }
  return true;
}

void append_lower_full(std::string& out, const std::vector<char32_t>& cps, std::size_t i) {
  const char32_t c = cps[i];
  if (c == 0x130) {
    out += 'i';
    append_utf8(out, 0x307);
  } else if (c == 0x3A3) {
    append_utf8(out, is_final_sigma(cps, i) ? 0x3C2 : 0x3C3);
  } else {
    append_utf8(out, simple_lower(c));
  }
}

}  // namespace

char32_t next_code_point(std::string_view text, std::size_t& pos) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(pos);
  if (b0 < 0x80) {
    ++pos;
    return b0;
  }
  const std::size_t left = text.size() - pos;
  std::size_t length = 0;
  char32_t cp = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  }
  bool valid = length != 0 && left >= length && byte(pos + 1) >= lo && byte(pos + 1) <= hi;
  for (std::size_t k = 1; valid && k < length; ++k) {
    if (k > 1 && !is_continuation(byte(pos + k))) valid = false;
    cp = (cp << 6) | (byte(pos + k) & 0x3F);
  }
  if (!valid) {
    ++pos;
    return kEscapeBase + b0;
  }
  pos += length;
  return cp;
}

std::vector<char32_t> decode_utf8(std::string_view text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (pos < text.size()) out.push_back(next_code_point(text, pos));
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp >= kEscapeBase + 0x80 && cp <= kEscapeBase + 0xFF) {
    out += static_cast<char>(cp - kEscapeBase);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string encode_utf8(const std::vector<char32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) append_utf8(out, cp);
  return out;
}

std::vector<std::size_t> code_point_offsets(std::string_view text) {
  std::vector<std::size_t> offsets;
  offsets.reserve(text.size() + 1);
  std::size_t pos = 0;
  while (pos < text.size()) {
    offsets.push_back(pos);
    next_code_point(text, pos);
  }
  offsets.push_back(text.size());
  return offsets;
}

std::size_t code_point_count(std::string_view text) {
  std::size_t count = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    next_code_point(text, pos);
    ++count;
  }
  return count;
}

bool is_space(char32_t c) {
  return in(c, 0x09, 0x0D) || in(c, 0x1C, 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         in(c, 0x2000, 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || in(c, 0x1C, 0x1E) || c == 0x85 || c == 0x2028 ||
         c == 0x2029;
}

bool is_printable(char32_t c) {
  if (c == ' ') return true;
  if (c < 0x20 || in(c, 0x7F, 0xA0) || c == 0xAD) return false;
  if (is_space(c)) return false;  // Zs/Zl/Zp other than ' '
  if (in(c, 0x600, 0x605) || c == 0x61C || c == 0x6DD || c == 0x70F || c == 0x8E2 || c == 0x180E)
    return false;
  if (in(c, 0x200B, 0x200F) || in(c, 0x202A, 0x202E) || in(c, 0x2060, 0x2064) || in(c, 0x2066, 0x206F)) {
    return false;
  }
  if (c == 0xFEFF || in(c, 0xFFF9, 0xFFFB) || in(c, 0xD800, 0xF8FF)) return false;  // Cf, Cs, Co
  if (in(c, 0xFDD0, 0xFDEF) || (c & 0xFFFE) == 0xFFFE) return false;                // noncharacters
  if (c == 0x110BD || c == 0x110CD || in(c, 0x13430, 0x1343F) || in(c, 0x1BCA0, 0x1BCA3)) return false;
  if (in(c, 0x1D173, 0x1D17A) || c == 0xE0001 || in(c, 0xE0020, 0xE007F) || c >= 0xF0000) return false;
  return true;
}

bool is_cased(char32_t c) {
  return simple_lower(c) != c || simple_upper(c) != c || c == 0xDF || c == 0x138 || c == 0x149 || c == 0x130;
}
bool is_upper(char32_t c) { return simple_lower(c) != c || c == 0x130; }
bool is_lower(char32_t c) { return simple_upper(c) != c || c == 0xDF || c == 0x138 || c == 0x149; }

bool is_alpha(char32_t c) {
  if (c < 0x80) return in(c, 'a', 'z') || in(c, 'A', 'Z');
  if (is_cased(c) || c == 0xAA || c == 0xBA) return true;
  return in(c, 0x5D0, 0x5EA) || in(c, 0x620, 0x64A) || in(c, 0x905, 0x939) || in(c, 0xE01, 0xE30) ||
         in(c, 0x3041, 0x3096) || in(c, 0x30A1, 0x30FA) || in(c, 0x3400, 0x4DBF) || in(c, 0x4E00, 0x9FFF) ||
         in(c, 0xAC00, 0xD7A3) || in(c, 0xF900, 0xFAFF);
}

bool is_digit(char32_t c) {
  return in(c, '0', '9') || c == 0xB2 || c == 0xB3 || c == 0xB9 || in(c, 0x660, 0x669) ||
         in(c, 0x6F0, 0x6F9) || in(c, 0x966, 0x96F) || in(c, 0xFF10, 0xFF19);
}

std::string to_upper(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (pos < text.size()) append_upper_full(out, next_code_point(text, pos));
  return out;
}

std::string to_lower(std::string_view text) {
  const std::vector<char32_t> cps = decode_utf8(text);
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < cps.size(); ++i) append_lower_full(out, cps, i);
  return out;
}

std::string to_title(std::string_view text) {
  const std::vector<char32_t> cps = decode_utf8(text);
  std::string out;
  out.reserve(text.size());
  bool previous_is_cased = false;
  for (std::size_t i = 0; i < cps.size(); ++i) {
    if (previous_is_cased) {
      append_lower_full(out, cps, i);
    } else {
      append_title_full(out, cps[i]);
    }
    previous_is_cased = is_cased(cps[i]);
  }
  return out;
}

std::string capitalize(std::string_view text) {
  const std::vector<char32_t> cps = decode_utf8(text);
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < cps.size(); ++i) {
    if (i == 0) {
      append_title_full(out, cps[i]);
    } else {
      append_lower_full(out, cps, i);
    }
  }
  return out;
}

std::string strip(std::string_view text, const std::string* chars, bool left, bool right) {
  std::vector<char32_t> set;
  if (chars != nullptr) set = decode_utf8(*chars);
  const auto strippable = [&](char32_t c) {
    return chars == nullptr ? is_space(c) : std::find(set.begin(), set.end(), c) != set.end();
  };
  // Only the ends are decoded; the kept middle is copied as bytes, so undecodable bytes
  // survive unchanged.
  std::size_t begin = 0;
  if (left) {
    while (begin < text.size()) {
      std::size_t next = begin;
      if (!strippable(next_code_point(text, next))) break;
      begin = next;
    }
  }
  std::size_t end = text.size();
  if (right) {
    while (end > begin) {
      std::size_t start = end - 1;
      while (start > begin && end - start < 4 && is_continuation(static_cast<unsigned char>(text[start])))
        --start;
      std::size_t probe = start;
      char32_t cp = next_code_point(text, probe);
      if (probe != end) {  // not one valid sequence: the last byte stands alone
        start = end - 1;
        probe = start;
        cp = next_code_point(text, probe);
      }
      if (!strippable(cp)) break;
      end = start;
    }
  }
  return std::string(text.substr(begin, end - begin));
}

std::string replace(std::string_view text, std::string_view old, std::string_view replacement,
                    long long count) {
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement before every code point and at the end.
    const std::vector<std::size_t> offsets = code_point_offsets(text);
    long long done = 0;
    for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
      if (count < 0 || done < count) {
        out += replacement;
        ++done;
      }
      out += text.substr(offsets[i], offsets[i + 1] - offsets[i]);
    }
    if (count < 0 || done < count) out += replacement;
    return out;
  }
  std::size_t pos = 0;
  long long done = 0;
  while (count < 0 || done < count) {
    const std::size_t hit = text.find(old, pos);
    if (hit == std::string_view::npos) break;
    out += text.substr(pos, hit - pos);
    out += replacement;
    pos = hit + old.size();
    ++done;
  }
  out += text.substr(pos);
  return out;
}

std::size_t replaced_size(std::string_view text, std::string_view old, std::string_view replacement,
                          long long count) {
  std::size_t hits = 0;
  if (old.empty()) {
    hits = code_point_count(text) + 1;
  } else {
    for (std::size_t pos = text.find(old); pos != std::string_view::npos;
         pos = text.find(old, pos + old.size())) {
      ++hits;
      if (count >= 0 && hits >= static_cast<std::size_t>(count)) break;
    }
  }
  if (count >= 0) hits = std::min(hits, static_cast<std::size_t>(count));
  std::size_t added = 0;
  std::size_t total = 0;
  if (__builtin_mul_overflow(hits, replacement.size(), &added) ||
      __builtin_add_overflow(text.size() - hits * old.size(), added, &total)) {
    return static_cast<std::size_t>(-1);
  }
  return total;
}

std::vector<std::string> splitlines(std::string_view text, bool keepends) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t begin = pos;
    const char32_t cp = next_code_point(text, pos);
    if (!is_line_break(cp)) continue;
    std::size_t end_of_break = pos;
    if (cp == '\r' && pos < text.size() && text[pos] == '\n') end_of_break = ++pos;
    lines.emplace_back(text.substr(start, (keepends ? end_of_break : begin) - start));
    start = pos;
  }
  if (start < text.size()) lines.emplace_back(text.substr(start));
  return lines;
}

}  // namespace tokenmill::jinja
