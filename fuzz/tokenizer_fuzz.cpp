// libFuzzer target for the tokenizer: encoding arbitrary bytes, decoding arbitrary ids, and
// loading arbitrary tokenizer.json text and GGUF vocabularies.
//
// The first input byte picks what to do with the rest:
//   bits 0-1  0..2: encode with one of three committed tokenizers (SentencePiece-style,
//             Llama 3 byte-level, Falcon byte-level); 3: load the rest as tokenizer.json
//             (bit 4 clear) or as a GGUF file (bit 4 set) and encode a sample with it
//   bit 2     parse_special
//   bit 3     treat the rest as little-endian int32 ids to decode instead of text
// Properties checked: every failure is a tokenmill::Error; encoded ids are in range;
// decoded text is valid UTF-8; streaming decode equals decode; byte-level tokenizers
// round-trip (repaired) text exactly.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "formats/gguf.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/utf8.h"

namespace {

using tokenmill::Tokenizer;

const std::vector<Tokenizer>& tokenizers() {
  static const std::vector<Tokenizer> all = [] {
    const std::string dir = std::string(TOKENMILL_FIXTURES_DIR) + "/tokenizers/";
    return std::vector<Tokenizer>{Tokenizer::from_file(dir + "spm_legacy/tokenizer.json"),
                                  Tokenizer::from_file(dir + "llama3/tokenizer.json"),
                                  Tokenizer::from_file(dir + "falcon/tokenizer.json")};
  }();
  return all;
}

void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "tokenizer_fuzz: property violated: %s\n", what);
  __builtin_trap();
}

void check_decode(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  const std::string text = tok.decode(ids);
  check(tokenmill::utf8::is_valid(text), "decode gives valid UTF-8");
  tokenmill::StreamingDecoder stream(tok);
  std::string streamed;
  for (const int32_t id : ids) {
    const std::string part = stream.push(id);
    check(tokenmill::utf8::is_valid(part), "streaming gives valid UTF-8");
    streamed += part;
  }
  streamed += stream.flush();
  check(streamed == text, "streaming decode equals decode");
}

void encode_text(const Tokenizer& tok, std::string_view text, bool parse_special, bool byte_level) {
  const auto ids = tok.encode(text, {.add_special_tokens = false, .parse_special = parse_special});
  for (const int32_t id : ids) check(id >= 0 && id < tok.vocab_size(), "encoded ids are in range");
  check_decode(tok, ids);
  if (byte_level && !parse_special) check(tok.decode(ids) == tokenmill::utf8::make_valid(text), "round trip");
}

void decode_ids(const Tokenizer& tok, std::span<const uint8_t> bytes) {
  std::vector<int32_t> ids(bytes.size() / 4);
  for (size_t i = 0; i < ids.size(); ++i) {
    uint32_t raw = 0;
    std::memcpy(&raw, bytes.data() + 4 * i, 4);
    // Mostly valid ids, sometimes just outside the vocabulary on either side.
    ids[i] = static_cast<int32_t>(raw % static_cast<uint32_t>(tok.vocab_size() + 16)) - 8;
  }
  bool in_range = true;
  for (const int32_t id : ids) in_range &= id >= 0 && id < tok.vocab_size();
  try {
    check_decode(tok, ids);
    check(in_range, "out-of-range ids are refused");
  } catch (const tokenmill::Error&) {
    check(!in_range, "in-range ids decode");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::span<const uint8_t> rest(data + 1, size - 1);
  const std::string_view text(reinterpret_cast<const char*>(rest.data()), rest.size());
  const bool parse_special = (mode & 4) != 0;
  try {
    const unsigned which = mode & 3;
    if (which < 3) {
      const Tokenizer& tok = tokenizers()[which];
      if (mode & 8) {
        decode_ids(tok, rest);
      } else {
        encode_text(tok, text, parse_special, which != 0);
      }
    } else if (mode & 16) {
      const auto gguf =
          tokenmill::GgufFile::parse(std::as_bytes(std::span(rest.data(), rest.size())), "fuzz input");
      const Tokenizer tok = Tokenizer::from_gguf(gguf);
      encode_text(tok, "Hello world! 你好 🦙 <s>", parse_special, false);
    } else {
      const Tokenizer tok = Tokenizer::from_spec(tokenmill::parse_tokenizer_json_text(text, "fuzz input"));
      encode_text(tok, "Hello world! 你好 🦙 <s>", parse_special, false);
    }
  } catch (const tokenmill::Error&) {
    // Refusing bad input is the expected outcome.
  }
  return 0;
}
