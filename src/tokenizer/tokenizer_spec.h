// TokenizerSpec: everything a tokenizer is built from, as read from tokenizer.json
// (+ tokenizer_config.json) or from GGUF metadata. The loaders only fill this in; the
// Tokenizer validates it and compiles it (regexes, merge tables) once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tokenmill {

// What a vocabulary entry is (the GGUF token_type values, in the same order).
enum class TokenKind : uint8_t {
  Normal,       // produced by the model from text
  Unknown,      // the unk token
  Control,      // special: <s>, <|eot_id|> ... matched in text only with parse_special
  UserDefined,  // an added, non-special token: always matched in text
  Unused,
  Byte,  // <0xNN> byte-fallback token
};

struct AddedTokenSpec {
  int32_t id = 0;
  std::string content;
  bool special = false;  // special tokens are matched in text only with parse_special
  bool lstrip = false;   // swallows whitespace on its left
  bool rstrip = false;   // swallows whitespace on its right
  bool single_word = false;
  // Matched in the normalized text (after the normalizer), and its content is normalized
  // too, as HF does for added tokens with "normalized": true. Otherwise matched in the raw
  // input text.
  bool normalized = false;
};

// How a Split keeps what its pattern matched (HF SplitDelimiterBehavior).
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// When Metaspace puts the replacement character in front of a piece.
enum class PrependScheme { Always, First, Never };

struct NormalizerSpec {
  enum class Kind { Prepend, Replace, Nfc, Nfd, Nfkc, Nfkd, Lowercase, Strip };
  Kind kind = Kind::Prepend;
  std::string pattern;  // Replace: a regex (literal patterns are escaped by the loader)
  std::string content;  // Prepend: the prefix; Replace: the replacement
  bool strip_left = false, strip_right = false;
};

struct PreTokenizerSpec {
  enum class Kind { Split, ByteLevel, Metaspace, Digits, Punctuation };
  Kind kind = Kind::Split;
  std::string pattern;  // Split: a regex
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;
  bool add_prefix_space = false;             // ByteLevel
  bool use_regex = true;                     // ByteLevel: split with the GPT-2 regex first
  std::string replacement = "\xE2\x96\x81";  // Metaspace: U+2581 '▁'
  PrependScheme prepend_scheme = PrependScheme::Always;
  bool split = true;               // Metaspace
  bool individual_digits = false;  // Digits
};

struct DecoderSpec {
  enum class Kind { ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip };
  Kind kind = Kind::ByteLevel;
  std::string pattern;                       // Replace: a literal string
  std::string content;                       // Replace: replacement; Strip: the character to strip
  size_t start = 0, stop = 0;                // Strip
  std::string replacement = "\xE2\x96\x81";  // Metaspace
  PrependScheme prepend_scheme = PrependScheme::Always;
};

struct TokenizerSpec {
  std::string source;  // the file it came from, for error messages

  // The vocabulary by id, model tokens and added tokens together (ids with no token hold
  // an empty string and kind Unused).
  std::vector<std::string> tokens;
  std::vector<TokenKind> kinds;
  // BPE merges in rank order. If empty and `scores` is set, merges are derived from the
  // vocabulary as SentencePiece does: a pair merges if its concatenation is a Normal token,
  // higher score first.
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<float> scores;
  std::optional<int32_t> unk_id;
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;  // a word that is itself a token skips the merges (Llama 3)

  std::vector<AddedTokenSpec> added_tokens;
  std::vector<NormalizerSpec> normalizers;
  std::vector<PreTokenizerSpec> pre_tokenizers;
  std::vector<DecoderSpec> decoders;
  bool decoder_joins_with_space = false;  // no decoder at all: HF joins tokens with ' '

  // The post-processor's template for one sequence: ids before and after the text.
  std::vector<int32_t> prefix_ids;
  std::vector<int32_t> suffix_ids;

  std::optional<int32_t> bos_id, eos_id, pad_id;
  std::vector<int32_t> eos_ids;  // every id that ends generation (eos_id first)
  std::string chat_template;
  std::string bos_token, eos_token;
};

}  // namespace tokenmill
