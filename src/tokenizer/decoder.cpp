#include "tokenizer/decoder.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace tokenmill {
namespace {

using Kind = DecoderSpec::Kind;

std::string replace_literal(const std::string& token, const std::string& pattern,
                            const std::string& content) {
  if (pattern.empty()) return token;
  std::string out;
  size_t last = 0;
  for (size_t pos = token.find(pattern); pos != std::string::npos; pos = token.find(pattern, last)) {
    out.append(token, last, pos - last);
    out.append(content);
    last = pos + pattern.size();
  }
  out.append(token, last);
  return out;
}

// Splits valid UTF-8 into its characters (invalid bytes become single-byte pieces).
std::vector<std::string_view> characters(std::string_view s) {
  std::vector<std::string_view> chars;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t n = utf8::sequence_length(s, pos);
    if (n == 0) n = 1;
    chars.push_back(s.substr(pos, n));
    pos += n;
  }
  return chars;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "<0xNN>" -> NN, else -1.
int byte_token_value(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  const int hi = hex_value(t[3]), lo = hex_value(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::vector<std::string> byte_fallback(std::vector<std::string> tokens, bool raw_bytes) {
  std::vector<std::string> out;
  std::string bytes;
  size_t count = 0;
  auto flush = [&] {
    if (count == 0) return;
    if (raw_bytes || utf8::is_valid(bytes)) {
      out.push_back(bytes);
    } else {
      for (size_t i = 0; i < count; ++i) out.emplace_back(utf8::kReplacement);
    }
    bytes.clear();
    count = 0;
  };
  for (std::string& token : tokens) {
    const int b = byte_token_value(token);
    if (b >= 0) {
      bytes.push_back(static_cast<char>(b));
      ++count;
    } else {
      flush();
      out.push_back(std::move(token));
    }
  }
  flush();
  return out;
}

std::string strip(const std::string& token, std::string_view content, size_t start, size_t stop) {
  const std::vector<std::string_view> chars = characters(token);
  size_t begin = 0, end = chars.size();
  for (size_t i = 0; i < std::min(start, chars.size()) && chars[i] == content; ++i) begin = i + 1;
  for (size_t i = 0; i < std::min(stop, chars.size()) && chars[chars.size() - 1 - i] == content; ++i)
    end = chars.size() - i - 1;
  std::string out;
  for (size_t i = begin; i < end; ++i) out.append(chars[i]);
  return out;
}

}  // namespace

Decoder::Decoder(const std::vector<DecoderSpec>& steps, bool join_with_space)
    : steps_(steps), join_with_space_(join_with_space) {}

std::string Decoder::decode(std::vector<std::string> tokens, bool raw_bytes, DecodeAt at) const {
  const bool at_start = at == DecodeAt::Start;
  bool whole_text = false;  // whether a step has joined the tokens into one string
  const auto valid = [raw_bytes](std::string text) { return raw_bytes ? text : utf8::make_valid(text); };
  for (const DecoderSpec& step : steps_) {
    switch (step.kind) {
      case Kind::ByteLevel: {
        std::string bytes;
        for (const std::string& t : tokens)
          if (!byte_level::decode(t, bytes)) bytes.append(t);
        tokens.assign(1, valid(std::move(bytes)));
        whole_text = true;
        break;
      }
      case Kind::Replace:
        for (std::string& t : tokens) t = replace_literal(t, step.pattern, step.content);
        break;
      case Kind::ByteFallback: tokens = byte_fallback(std::move(tokens), raw_bytes); break;
      case Kind::Fuse: {
        std::string joined;
        for (const std::string& t : tokens) joined += t;
        tokens.assign(1, std::move(joined));
        whole_text = true;
        break;
      }
      case Kind::Strip:
        // Each token loses `start` leading content; once joined, the one token is the whole
        // text, and a continuation does not hold the text's start.
        for (std::string& t : tokens)
          t = strip(t, step.content, whole_text && !at_start ? 0 : step.start, step.stop);
        break;
      case Kind::Metaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          // HF drops every replacement in token 0; once joined, token 0 is the whole text,
          // so a continuation is still part of it.
          const bool drop = i == 0 && (at_start || whole_text) && step.prepend_scheme != PrependScheme::Never;
          tokens[i] = replace_literal(tokens[i], step.replacement, drop ? "" : " ");
        }
        break;
    }
  }
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (join_with_space_ && i > 0) out.push_back(' ');
    out += tokens[i];
  }
  return valid(std::move(out));
}

}  // namespace tokenmill
