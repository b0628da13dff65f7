// tokenizer.ggml.* metadata from a Hugging Face tokenizer (convert/hf_to_gguf.h).
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "convert/hf_to_gguf.h"
#include "core/error.h"
#include "formats/gguf.h"
#include "tokenizer/gguf_vocab.h"

namespace tokenmill {

namespace {

// GGUF token_type values (llama.cpp's llama_token_type).
enum : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

const char* const kPreTokenizerNames[] = {"gpt-2",  "llama-bpe",    "qwen2",          "smollm",
                                          "falcon", "deepseek-llm", "deepseek-coder", "deepseek-v3"};

bool same(const PreTokenizerSpec& a, const PreTokenizerSpec& b) {
  return a.kind == b.kind && a.pattern == b.pattern && a.behavior == b.behavior && a.invert == b.invert &&
         a.add_prefix_space == b.add_prefix_space && a.use_regex == b.use_regex &&
         a.individual_digits == b.individual_digits;
}

bool same(const NormalizerSpec& a, const NormalizerSpec& b) {
  return a.kind == b.kind && a.pattern == b.pattern && a.content == b.content &&
         a.strip_left == b.strip_left && a.strip_right == b.strip_right;
}

template <class T>
bool same_list(const std::vector<T>& a, const std::vector<T>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const T& x, const T& y) { return same(x, y); });
}

// What tokenmill's GGUF vocab reader builds for tokenizer.ggml.pre = `pre`.
TokenizerSpec family(const char* pre) {
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", pre);
  const std::string token = "a";
  w.set_string_array("tokenizer.ggml.tokens", std::span<const std::string>(&token, 1));
  w.set_string_array("tokenizer.ggml.merges", std::span<const std::string>());
  const std::string bytes = w.to_bytes();
  return read_gguf_vocab(GgufFile::parse(std::as_bytes(std::span<const char>(bytes)), pre));
}

// convert_hf_to_gguf.py's does_token_look_special, for added tokens not marked special.
bool looks_special(const std::string& t) {
  return t == "<pad>" || t == "<mask>" || (t.starts_with("<|") && t.ends_with("|>")) ||
         (t.starts_with("<\xEF\xBD\x9C") && t.ends_with("\xEF\xBD\x9C>")) ||
         (t.starts_with("<unused") && t.ends_with(">"));
}

bool is_byte_level(const TokenizerSpec& spec) {
  const bool pre =
      std::any_of(spec.pre_tokenizers.begin(), spec.pre_tokenizers.end(),
                  [](const PreTokenizerSpec& p) { return p.kind == PreTokenizerSpec::Kind::ByteLevel; });
  const bool dec = std::any_of(spec.decoders.begin(), spec.decoders.end(),
                               [](const DecoderSpec& d) { return d.kind == DecoderSpec::Kind::ByteLevel; });
  return pre && dec && !spec.byte_fallback;
}

// GPT-2 merges are "left right"; a space inside a part is written as U+0120, as gguf-py does.
std::string merge_string(const std::pair<std::string, std::string>& m) {
  auto escape = [](const std::string& s) {
    std::string out;
    for (char c : s) out += c == ' ' ? std::string("\xC4\xA0") : std::string(1, c);
    return out;
  };
  return escape(m.first) + " " + escape(m.second);
}

// SentencePiece-style BPE: scores that make the reader's score-ordered merges follow the
// merge ranks (the token a merge produces scores -rank; others score below every merge).
std::vector<float> merge_scores(const TokenizerSpec& spec, size_t n) {
  std::map<std::string, size_t> rank;
  for (size_t r = 0; r < spec.merges.size(); ++r)
    rank.emplace(spec.merges[r].first + spec.merges[r].second, r);
  std::vector<float> scores(n, 0.0f);
  for (size_t i = 0; i < spec.tokens.size(); ++i) {
    const auto it = rank.find(spec.tokens[i]);
    if (spec.tokens[i].size() > 1 && spec.kinds[i] == TokenKind::Normal)
      scores[i] = -static_cast<float>(it != rank.end() ? it->second : spec.merges.size() + i);
  }
  return scores;
}

bool adds_space_prefix(const TokenizerSpec& spec) {
  for (const NormalizerSpec& n : spec.normalizers)
    if (n.kind == NormalizerSpec::Kind::Prepend) return true;
  for (const PreTokenizerSpec& p : spec.pre_tokenizers)
    if (p.kind == PreTokenizerSpec::Kind::Metaspace) return p.prepend_scheme != PrependScheme::Never;
  return false;
}

int32_t token_type(const TokenizerSpec& spec, size_t i, bool byte_level) {
  switch (spec.kinds[i]) {
    case TokenKind::Control: return kControl;
    case TokenKind::UserDefined: return looks_special(spec.tokens[i]) ? kControl : kUserDefined;
    case TokenKind::Unused: return kUnused;
    case TokenKind::Unknown: return byte_level ? kNormal : kUnknown;
    case TokenKind::Byte: return byte_level ? kNormal : kByte;
    default: return kNormal;
  }
}

}  // namespace

std::string llama_cpp_pre_tokenizer(const TokenizerSpec& spec) {
  for (const char* name : kPreTokenizerNames) {
    const TokenizerSpec f = family(name);
    if (same_list(f.pre_tokenizers, spec.pre_tokenizers) && same_list(f.normalizers, spec.normalizers))
      return name;
  }
  return "";
}

void set_tokenizer_metadata(GgufWriter& w, const TokenizerSpec& spec, int64_t vocab_size, const LogFn& log) {
  const bool byte_level = is_byte_level(spec);
  if (!byte_level && !spec.byte_fallback)
    fail(
        "{}: only byte-level BPE (GPT-2, Llama 3, Qwen2, SmolLM) and SentencePiece-style BPE with byte "
        "fallback tokenizers can be written to GGUF",
        spec.source);
  if (static_cast<int64_t>(spec.tokens.size()) > vocab_size)
    fail("{}: the tokenizer has {} tokens but the model's vocab_size is {}", spec.source, spec.tokens.size(),
         vocab_size);
  const auto n = static_cast<size_t>(vocab_size);
  std::vector<std::string> tokens(n);
  std::vector<int32_t> types(n, kUnused);
  for (size_t i = 0; i < n; ++i) {
    const bool unused = i >= spec.tokens.size() || spec.kinds[i] == TokenKind::Unused;
    tokens[i] = unused ? fmt::format("[PAD{}]", i) : spec.tokens[i];
    if (!unused) types[i] = token_type(spec, i, byte_level);
  }
  w.set_string("tokenizer.ggml.model", byte_level ? "gpt2" : "llama");
  if (byte_level) {
    std::string pre = llama_cpp_pre_tokenizer(spec);
    if (pre.empty()) {
      if (log)
        log(
            fmt::format("{}: pre-tokenizer not recognised as one llama.cpp names; writing \"default\" "
                        "(GPT-2's), which may split text differently",
                        spec.source));
      pre = "default";
    }
    w.set_string("tokenizer.ggml.pre", pre);
  }
  w.set_string_array("tokenizer.ggml.tokens", std::span<const std::string>(tokens));
  if (!byte_level) w.set_array("tokenizer.ggml.scores", std::span<const float>(merge_scores(spec, n)));
  w.set_array("tokenizer.ggml.token_type", std::span<const int32_t>(types));
  if (byte_level) {
    std::vector<std::string> merges;
    merges.reserve(spec.merges.size());
    for (const auto& m : spec.merges) merges.push_back(merge_string(m));
    w.set_string_array("tokenizer.ggml.merges", std::span<const std::string>(merges));
  }
  auto id = [&](const char* key, const std::optional<int32_t>& v) {
    if (v) w.set_u32(key, static_cast<uint32_t>(*v));
  };
  id("tokenizer.ggml.bos_token_id", spec.bos_id);
  id("tokenizer.ggml.eos_token_id", spec.eos_id);
  id("tokenizer.ggml.unknown_token_id", spec.unk_id);
  id("tokenizer.ggml.padding_token_id", spec.pad_id);
  w.set_bool("tokenizer.ggml.add_bos_token",
             spec.bos_id && !spec.prefix_ids.empty() && spec.prefix_ids.front() == *spec.bos_id);
  w.set_bool("tokenizer.ggml.add_eos_token",
             spec.eos_id && !spec.suffix_ids.empty() && spec.suffix_ids.back() == *spec.eos_id);
  if (!byte_level) w.set_bool("tokenizer.ggml.add_space_prefix", adds_space_prefix(spec));
  if (!spec.chat_template.empty()) w.set_string("tokenizer.chat_template", spec.chat_template);
}

}  // namespace tokenmill
