#include "tokenizer/normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace tokenmill {
namespace {

using Kind = NormalizerSpec::Kind;

std::string unicode_normalize(std::string_view text, Kind kind) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = nullptr;
  switch (kind) {
    case Kind::Nfc: normalizer = icu::Normalizer2::getNFCInstance(status); break;
    case Kind::Nfd: normalizer = icu::Normalizer2::getNFDInstance(status); break;
    case Kind::Nfkc: normalizer = icu::Normalizer2::getNFKCInstance(status); break;
    default: normalizer = icu::Normalizer2::getNFKDInstance(status); break;
  }
  if (U_FAILURE(status)) fail("tokenizer: Unicode normalization unavailable: {}", u_errorName(status));
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  if (normalizer->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return std::string(text);
  status = U_ZERO_ERROR;
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
  normalizer->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) fail("tokenizer: Unicode normalization failed: {}", u_errorName(status));
  return out;
}

// Full lowercase mapping of each character on its own (HF maps char by char, so a final
// sigma is not treated specially).
std::string lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t cp = 0;
    size_t n = utf8::decode(text, pos, cp);
    if (n == 0) n = 1, cp = 0xFFFD;
    pos += n;
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
      continue;
    }
    UChar in[2];
    int32_t in_len = 0;
    UBool error = false;
    U16_APPEND(in, in_len, 2, static_cast<UChar32>(cp), error);
    UChar lower[8];
    UErrorCode status = U_ZERO_ERROR;
    const int32_t lower_len = u_strToLower(lower, 8, in, in_len, "", &status);
    if (U_FAILURE(status) || error) {
      utf8::append(out, cp);
      continue;
    }
    for (int32_t i = 0; i < lower_len;) {
      UChar32 c = 0;
      U16_NEXT(lower, i, lower_len, c);
      utf8::append(out, static_cast<char32_t>(c));
    }
  }
  return out;
}

std::string strip(std::string_view text, bool left, bool right) {
  size_t begin = 0, end = text.size();
  if (left) {
    while (begin < end) {
      char32_t cp = 0;
      const size_t n = utf8::decode(text, begin, cp);
      if (n == 0 || !is_unicode_whitespace(cp)) break;
      begin += n;
    }
  }
  if (right) {
    while (end > begin) {
      size_t pos = end - 1;
      while (pos > begin && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) --pos;
      char32_t cp = 0;
      const size_t n = utf8::decode(text, pos, cp);
      if (n == 0 || !is_unicode_whitespace(cp)) break;
      end = pos;
    }
  }
  return std::string(text.substr(begin, end - begin));
}

std::string replace_all(std::string_view text, const Regex& regex, const std::string& content) {
  std::vector<RegexMatch> matches;
  regex.find_all(text, matches);
  if (matches.empty()) return std::string(text);
  std::string out;
  size_t last = 0;
  for (const RegexMatch& m : matches) {
    out.append(text.substr(last, m.begin - last));
    out.append(content);
    last = m.end;
  }
  out.append(text.substr(last));
  return out;
}

}  // namespace

bool is_unicode_whitespace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

Normalizer::Normalizer(const std::vector<NormalizerSpec>& steps) {
  for (const NormalizerSpec& spec : steps) {
    Step step{spec, {}};
    if (spec.kind == Kind::Replace) step.regex.emplace_back(spec.pattern, "normalizer Replace");
    steps_.push_back(std::move(step));
  }
}

std::string Normalizer::apply(std::string_view text) const {
  std::string current(text);
  for (const Step& step : steps_) {
    switch (step.spec.kind) {
      case Kind::Prepend:
        if (!current.empty()) current.insert(0, step.spec.content);
        break;
      case Kind::Replace: current = replace_all(current, step.regex.front(), step.spec.content); break;
      case Kind::Nfc:
      case Kind::Nfd:
      case Kind::Nfkc:
      case Kind::Nfkd: current = unicode_normalize(current, step.spec.kind); break;
      case Kind::Lowercase: current = lowercase(current); break;
      case Kind::Strip: current = strip(current, step.spec.strip_left, step.spec.strip_right); break;
    }
  }
  return current;
}

}  // namespace tokenmill
