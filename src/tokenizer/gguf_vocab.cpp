#include "tokenizer/gguf_vocab.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "formats/gguf.h"
#include "tokenizer/pretokenizer.h"

namespace tokenmill {
namespace {

constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// DeepSeek LLM's Split rules, from its tokenizer.json.
const char* const kDeepSeekLlmPatterns[] = {
    "[\r\n]",
    ("\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-"
     "\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481"
     "\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-"
     "\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57"
     "\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3"
     "\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d"
     "\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184"
     "\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-"
     "\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-"
     "\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2"
     "\U000118a0-\U000118df\U0001e900-\U0001e943]+"),
    "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
    "\\s+$",
    "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+",
    "\\p{N}+",
};

const char* const kDeepSeekCoderPatterns[] = {
    "[\r\n]",
    "\\s?\\p{L}+",
    "\\s?\\p{P}+",
    "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+",
};

const char* const kDeepSeekV3Patterns[] = {
    "\\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    ("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
     "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"),
};

PreTokenizerSpec split(const char* pattern) {
  PreTokenizerSpec s;
  s.kind = PreTokenizerSpec::Kind::Split;
  s.pattern = pattern;
  s.behavior = SplitBehavior::Isolated;
  return s;
}

PreTokenizerSpec byte_level(bool use_regex) {
  PreTokenizerSpec s;
  s.kind = PreTokenizerSpec::Kind::ByteLevel;
  s.add_prefix_space = false;
  s.use_regex = use_regex;
  return s;
}

PreTokenizerSpec digits(bool individual) {
  PreTokenizerSpec s;
  s.kind = PreTokenizerSpec::Kind::Digits;
  s.individual_digits = individual;
  return s;
}

// The HF pre-tokenizer chain of a tokenizer.ggml.pre family. False if unknown.
bool byte_level_family(const std::string& pre, TokenizerSpec& spec) {
  auto& p = spec.pre_tokenizers;
  if (pre == "default" || pre == "gpt-2" || pre == "gpt2" || pre == "mpt" || pre == "olmo") {
    p = {byte_level(true)};
  } else if (pre == "llama3" || pre == "llama-bpe") {
    p = {split(kLlama3Pattern), byte_level(false)};
    spec.ignore_merges = true;
  } else if (pre == "qwen2") {
    NormalizerSpec nfc;
    nfc.kind = NormalizerSpec::Kind::Nfc;
    spec.normalizers = {nfc};
    p = {split(kQwen2Pattern), byte_level(false)};
  } else if (pre == "deepseek-llm") {
    for (const char* pattern : kDeepSeekLlmPatterns) p.push_back(split(pattern));
    p.push_back(byte_level(false));
  } else if (pre == "deepseek-coder") {
    for (const char* pattern : kDeepSeekCoderPatterns) p.push_back(split(pattern));
    p.push_back(digits(true));
    p.push_back(byte_level(false));
  } else if (pre == "deepseek-v3") {
    for (const char* pattern : kDeepSeekV3Patterns) p.push_back(split(pattern));
    p.push_back(byte_level(false));
  } else if (pre == "falcon") {
    PreTokenizerSpec punct;
    punct.kind = PreTokenizerSpec::Kind::Punctuation;
    punct.behavior = SplitBehavior::Contiguous;
    p = {punct, byte_level(true), digits(false), split("[0-9][0-9][0-9]")};
  } else if (pre == "starcoder" || pre == "refact" || pre == "smollm") {
    p = {digits(true), byte_level(true)};
  } else {
    return false;
  }
  DecoderSpec decoder;
  decoder.kind = DecoderSpec::Kind::ByteLevel;
  spec.decoders = {decoder};
  return true;
}

void sentencepiece_family(bool add_space_prefix, TokenizerSpec& spec) {
  using NK = NormalizerSpec::Kind;
  using DK = DecoderSpec::Kind;
  const std::string marker = "\xE2\x96\x81";  // U+2581
  if (add_space_prefix) {
    NormalizerSpec prepend;
    prepend.kind = NK::Prepend;
    prepend.content = marker;
    spec.normalizers.push_back(prepend);
  }
  NormalizerSpec spaces;
  spaces.kind = NK::Replace;
  spaces.pattern.assign(1, ' ');  // a space needs no escaping in a regex
  spaces.content = marker;
  spec.normalizers.push_back(spaces);
  DecoderSpec replace;
  replace.kind = DK::Replace;
  replace.pattern = marker;
  replace.content.assign(1, ' ');
  DecoderSpec fallback, fuse, strip;
  fallback.kind = DK::ByteFallback;
  fuse.kind = DK::Fuse;
  strip.kind = DK::Strip;
  strip.content.assign(1, ' ');
  strip.start = add_space_prefix ? 1 : 0;
  spec.decoders = {replace, fallback, fuse, strip};
  spec.byte_fallback = true;
  spec.fuse_unk = true;
}

TokenKind kind_of(int64_t type) {
  switch (type) {
    case 2: return TokenKind::Unknown;
    case 3: return TokenKind::Control;
    case 4: return TokenKind::UserDefined;
    case 5: return TokenKind::Unused;
    case 6: return TokenKind::Byte;
    default: return TokenKind::Normal;  // 1 NORMAL, 0 UNDEFINED
  }
}

}  // namespace

TokenizerSpec read_gguf_vocab(const GgufFile& gguf) {
  TokenizerSpec spec;
  spec.source = gguf.label();
  const std::string model = gguf.get_string("tokenizer.ggml.model");
  spec.tokens = gguf.get_string_array("tokenizer.ggml.tokens");
  const size_t n = spec.tokens.size();
  if (n == 0) fail("{}: tokenizer.ggml.tokens is empty", spec.source);
  if (n >= static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    fail("{}: tokenizer.ggml.tokens has {} entries, too many", spec.source, n);

  spec.kinds.assign(n, TokenKind::Normal);
  if (gguf.has("tokenizer.ggml.token_type")) {
    const auto types = gguf.get_int_array("tokenizer.ggml.token_type");
    if (types.size() != n)
      fail("{}: tokenizer.ggml.token_type has {} entries for {} tokens", spec.source, types.size(), n);
    for (size_t i = 0; i < n; ++i) spec.kinds[i] = kind_of(types[i]);
  }
  if (gguf.has("tokenizer.ggml.scores")) {
    spec.scores = gguf.get_float_array("tokenizer.ggml.scores");
    if (spec.scores.size() != n)
      fail("{}: tokenizer.ggml.scores has {} entries for {} tokens", spec.source, spec.scores.size(), n);
  }

  auto id_of = [&](const char* key) -> std::optional<int32_t> {
    const auto v = gguf.find_int(key);
    if (!v) return std::nullopt;
    if (*v < 0 || static_cast<uint64_t>(*v) >= n) {
      // Some converters write -1 or an out-of-range id for "none"; only the unk id matters.
      return std::nullopt;
    }
    return static_cast<int32_t>(*v);
  };
  spec.bos_id = id_of("tokenizer.ggml.bos_token_id");
  spec.eos_id = id_of("tokenizer.ggml.eos_token_id");
  spec.unk_id = id_of("tokenizer.ggml.unknown_token_id");
  spec.pad_id = id_of("tokenizer.ggml.padding_token_id");

  bool add_bos = false;
  if (model == "llama") {
    sentencepiece_family(gguf.find_bool("tokenizer.ggml.add_space_prefix").value_or(true), spec);
    if (spec.scores.empty())
      fail("{}: tokenizer.ggml.scores is required for a \"llama\" tokenizer", spec.source);
    if (!spec.unk_id) {
      for (size_t i = 0; i < n; ++i)
        if (spec.kinds[i] == TokenKind::Unknown) spec.unk_id = static_cast<int32_t>(i);
    }
    add_bos = true;
  } else if (model == "gpt2") {
    const std::string pre = gguf.find_string("tokenizer.ggml.pre").value_or("default");
    if (!byte_level_family(pre, spec))
      fail(
          "{}: tokenizer.ggml.pre \"{}\" is not supported by tokenmill (supported: default, gpt-2, llama3, "
          "llama-bpe, qwen2, deepseek-llm, deepseek-coder, deepseek-v3, falcon, starcoder, refact, smollm, "
          "mpt, "
          "olmo)",
          spec.source, pre);
    const auto merges = gguf.get_string_array("tokenizer.ggml.merges");
    spec.merges.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      const std::string& m = merges[i];
      const size_t space = m.find(' ', 1);
      if (space == std::string::npos || space + 1 >= m.size())
        fail("{}: tokenizer.ggml.merges[{}] ({:?}) is not \"left right\"", spec.source, i, m);
      spec.merges.emplace_back(m.substr(0, space), m.substr(space + 1));
    }
    spec.scores.clear();
  } else {
    fail(
        "{}: tokenizer.ggml.model \"{}\" is not supported by tokenmill (supported: \"llama\" = SentencePiece "
        "BPE, \"gpt2\" = byte-level BPE)",
        spec.source, model);
  }

  for (size_t i = 0; i < n; ++i) {
    const TokenKind k = spec.kinds[i];
    if (k != TokenKind::Control && k != TokenKind::UserDefined && k != TokenKind::Unknown) continue;
    if (spec.tokens[i].empty()) continue;
    AddedTokenSpec added;
    added.id = static_cast<int32_t>(i);
    added.content = spec.tokens[i];
    added.special = k != TokenKind::UserDefined;
    spec.added_tokens.push_back(std::move(added));
  }

  if (spec.bos_id && gguf.find_bool("tokenizer.ggml.add_bos_token").value_or(add_bos))
    spec.prefix_ids.push_back(*spec.bos_id);
  if (spec.eos_id && gguf.find_bool("tokenizer.ggml.add_eos_token").value_or(false))
    spec.suffix_ids.push_back(*spec.eos_id);
  if (spec.bos_id) spec.bos_token = spec.tokens[static_cast<size_t>(*spec.bos_id)];
  if (spec.eos_id) spec.eos_token = spec.tokens[static_cast<size_t>(*spec.eos_id)];
  if (spec.eos_id) spec.eos_ids.push_back(*spec.eos_id);
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (const auto id = id_of(key);
        id && std::find(spec.eos_ids.begin(), spec.eos_ids.end(), *id) == spec.eos_ids.end())
      spec.eos_ids.push_back(*id);
  }
  spec.chat_template = gguf.find_string("tokenizer.chat_template").value_or("");
  return spec;
}

}  // namespace tokenmill
