// Reading Hugging Face tokenizer.json (and the files beside it in a model directory) into a
// TokenizerSpec. Supported: model BPE (vocab; merges as "a b" strings or [a, b] pairs;
// unk_token, byte_fallback, fuse_unk, ignore_merges); normalizers Sequence, Prepend,
// Replace, NFC/NFD/NFKC/NFKD, Lowercase, Strip; pre-tokenizers Sequence, ByteLevel, Split,
// Metaspace, Digits, Punctuation, Whitespace, WhitespaceSplit; post-processors
// TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing, Sequence; decoders
// Sequence, ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip; added_tokens with
// special/lstrip/rstrip/single_word. Anything else is an Error naming the feature.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer_spec.h"

namespace tokenmill {

// Parses a tokenizer.json document; `source` names it in error messages.
TokenizerSpec parse_tokenizer_json(const nlohmann::json& doc, std::string source);
// Parses tokenizer.json text (JSON syntax errors become Error too).
TokenizerSpec parse_tokenizer_json_text(std::string_view text, std::string source);
TokenizerSpec read_tokenizer_json(const std::filesystem::path& path);

// Applies tokenizer_config.json: bos_token/eos_token/pad_token/unk_token, add_bos_token and
// add_eos_token (which override the post-processor's template, as transformers does) and
// chat_template (a string, or a list of {name, template} from which "default" is taken).
void apply_tokenizer_config(const nlohmann::json& config, const std::string& source, TokenizerSpec& spec);

// dir/tokenizer.json + dir/tokenizer_config.json + dir/chat_template.jinja +
// dir/generation_config.json (eos_token_id: one id or a list), the last three optional.
TokenizerSpec read_model_dir_tokenizer(const std::filesystem::path& dir);

}  // namespace tokenmill
