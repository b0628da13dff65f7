// Tokenizer: text <-> token ids, matching Hugging Face `tokenizers` exactly for byte-level
// BPE (GPT-2, Llama 3, Qwen2, DeepSeek, Falcon, SmolLM, ...) and SentencePiece-style BPE
// (Llama 2, Mistral, Phi-3: byte fallback, the U+2581 space marker, a dummy prefix).
//
// Loaded from tokenizer.json (+ tokenizer_config.json, chat_template.jinja and
// generation_config.json in a model directory) or from GGUF metadata (tokenizer.ggml.*).
// Immutable after loading; copies share the loaded tables; safe to use from many threads.
//
// Encoding: invalid UTF-8 in the input is first replaced by U+FFFD (one per maximal invalid
// subpart, as Python's bytes.decode(errors="replace") does), so the ids are those HF gives
// for that repaired string. Special tokens ("<|eot_id|>", "<s>") written in the text are
// plain text unless EncodeOptions::parse_special is set (non-special added tokens are always
// recognised, as in HF).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_spec.h"

namespace tokenmill {

class GgufFile;

struct EncodeOptions {
  bool add_special_tokens = true;  // the BOS/EOS (post-processor template) as configured
  bool parse_special = false;      // recognise special tokens written in the text
};

class Tokenizer {
 public:
  // A tokenizer.json file, a *.gguf file, or a model directory (see from_model_dir).
  static Tokenizer from_file(const std::filesystem::path& path);
  // dir/tokenizer.json, plus dir/tokenizer_config.json (add_bos_token, add_eos_token,
  // bos/eos tokens, chat_template), dir/chat_template.jinja and dir/generation_config.json
  // (extra eos ids) when present.
  static Tokenizer from_model_dir(const std::filesystem::path& dir);
  // The tokenizer.ggml.* metadata of an open GGUF file.
  static Tokenizer from_gguf(const GgufFile& gguf);
  // Validates `spec` (Error naming spec.source on an inconsistency) and compiles it.
  static Tokenizer from_spec(TokenizerSpec spec);

  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options = {}) const;

  // The text of `ids` (valid UTF-8, invalid byte sequences shown as U+FFFD). Throws Error
  // if an id is outside [0, vocab_size()). skip_special drops special (control) tokens.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;
  // As decode, for ids that continue a text rather than start it (a stream's window): the
  // decoder's start-of-text rules (Strip's `start` on the joined text, Metaspace dropping
  // the first token's spaces while the tokens are not joined) do not apply.
  std::string decode_continuation(std::span<const int32_t> ids, bool skip_special = false) const;

  // The token's string as stored in the vocabulary (byte-level tokens in their mapped
  // form, e.g. "Ġhello"). Error if out of range.
  const std::string& piece(int32_t id) const;
  // The bytes one token decodes to on its own, before any UTF-8 repair: a byte-level or
  // <0xNN> token holding part of a character gives its raw bytes (decode gives U+FFFD).
  std::string token_bytes(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view piece) const;  // any token, added included
  TokenKind kind(int32_t id) const;
  bool is_special(int32_t id) const { return kind(id) == TokenKind::Control; }

  int32_t vocab_size() const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> pad_id() const;
  std::optional<int32_t> unk_id() const;
  // Every id that ends generation (eos_id first, then e.g. <|eot_id|>); may be empty.
  const std::vector<int32_t>& eos_ids() const;
  bool adds_bos() const;                     // whether encode(add_special_tokens) puts bos_id first
  const std::string& chat_template() const;  // empty if none
  const std::string& bos_token() const;      // strings, for chat templates ("" if none)
  const std::string& eos_token() const;
  const std::string& source() const;  // the file it was loaded from

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace tokenmill
