#include "tokenizer/tokenizer.h"

#include <fstream>
#include <limits>

#include "core/error.h"
#include "formats/gguf.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/utf8.h"

namespace tokenmill {
namespace {

// Checks what the compiled tables rely on; the loaders check their own formats.
const TokenizerSpec& validated(const TokenizerSpec& spec) {
  const size_t n = spec.tokens.size();
  if (n == 0) fail("{}: the vocabulary is empty", spec.source);
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    fail("{}: the vocabulary has {} tokens, more than tokenmill supports", spec.source, n);
  if (spec.kinds.size() != n) fail("{}: {} token kinds for {} tokens", spec.source, spec.kinds.size(), n);
  if (!spec.scores.empty() && spec.scores.size() != n)
    fail("{}: {} scores for {} tokens", spec.source, spec.scores.size(), n);
  auto check = [&](std::optional<int32_t> id, const char* what) {
    if (id && (*id < 0 || static_cast<size_t>(*id) >= n))
      fail("{}: {} id {} is outside the vocabulary (size {})", spec.source, what, *id, n);
  };
  check(spec.unk_id, "unk token");
  check(spec.bos_id, "bos token");
  check(spec.eos_id, "eos token");
  check(spec.pad_id, "pad token");
  for (const int32_t id : spec.eos_ids) check(id, "eos token");
  for (const int32_t id : spec.prefix_ids) check(id, "post-processor token");
  for (const int32_t id : spec.suffix_ids) check(id, "post-processor token");
  for (const AddedTokenSpec& t : spec.added_tokens) {
    check(t.id, "added token");
    if (t.content.empty()) fail("{}: added token {} has empty content", spec.source, t.id);
    if (!utf8::is_valid(t.content)) fail("{}: added token {} is not valid UTF-8", spec.source, t.id);
  }
  return spec;
}

// Added tokens matched in the raw text (normalized == false, or every token when there is no
// normalizer) or, with their content normalized, in the normalized text.
std::vector<AddedTokenSpec> added_tokens(const TokenizerSpec& spec, const Normalizer& normalizer,
                                         bool normalized) {
  std::vector<AddedTokenSpec> out;
  for (const AddedTokenSpec& t : spec.added_tokens) {
    const bool in_normalized = t.normalized && !normalizer.empty();
    if (in_normalized != normalized) continue;
    out.push_back(t);
    if (normalized) out.back().content = normalizer.apply(t.content);
    if (out.back().content.empty()) out.pop_back();
  }
  return out;
}

}  // namespace

struct Tokenizer::Impl {
  TokenizerSpec spec;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  Decoder decoder;
  BpeModel bpe;
  AddedTokenMatcher raw_added;
  AddedTokenMatcher normalized_added;
  TokenMap all_tokens;  // every token, added ones included: token_to_id

  explicit Impl(TokenizerSpec s)
      : spec(std::move(s)),
        normalizer(validated(spec).normalizers),
        pre_tokenizer(spec.pre_tokenizers),
        decoder(spec.decoders, spec.decoder_joins_with_space),
        bpe(spec),
        raw_added(added_tokens(spec, normalizer, false)),
        normalized_added(added_tokens(spec, normalizer, true)) {
    all_tokens.reserve(spec.tokens.size());
    for (size_t id = 0; id < spec.tokens.size(); ++id)
      if (!spec.tokens[id].empty()) all_tokens.emplace(spec.tokens[id], static_cast<int32_t>(id));
    // HF shows (and decodes) a normalized added token as its normalized content.
    if (!normalizer.empty()) {
      for (const AddedTokenSpec& t : spec.added_tokens) {
        if (!t.normalized) continue;
        std::string shown = normalizer.apply(t.content);
        if (!shown.empty()) spec.tokens[static_cast<size_t>(t.id)] = std::move(shown);
      }
    }
  }

  void check_id(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= spec.tokens.size())
      fail("token id {} is outside the vocabulary of {} (size {})", id, spec.source, spec.tokens.size());
  }

  // The text of `ids` (Tokenizer::decode and decode_continuation).
  std::string decode(std::span<const int32_t> ids, bool skip_special, DecodeAt at) const {
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (const int32_t id : ids) {
      check_id(id);
      if (skip_special && spec.kinds[static_cast<size_t>(id)] == TokenKind::Control) continue;
      const std::string& token = spec.tokens[static_cast<size_t>(id)];
      if (token.empty()) continue;  // an id with no token: HF skips it too
      tokens.push_back(token);
    }
    return decoder.decode(std::move(tokens), false, at);
  }

  // Encodes plain text (no raw-text added tokens in it) into `ids`.
  void encode_plain(std::string_view segment, bool at_origin, bool parse_special,
                    std::vector<int32_t>& ids) const {
    std::string normalized;
    if (!normalizer.empty()) {
      normalized = normalizer.apply(segment);
      segment = normalized;
    }
    std::vector<AddedTokenMatcher::Piece> pieces;
    normalized_added.split(segment, parse_special, pieces);
    Pieces words, scratch;
    for (const AddedTokenMatcher::Piece& piece : pieces) {
      if (piece.id >= 0) {
        ids.push_back(piece.id);
        continue;
      }
      pre_tokenizer.split(segment.substr(piece.begin, piece.end - piece.begin), at_origin && piece.begin == 0,
                          words, scratch);
      for (const Pieces::Span& span : words.spans) bpe.encode_word(words.view(span), ids);
    }
  }
};

Tokenizer Tokenizer::from_spec(TokenizerSpec spec) {
  return Tokenizer(std::make_shared<const Impl>(std::move(spec)));
}

Tokenizer Tokenizer::from_gguf(const GgufFile& gguf) { return from_spec(read_gguf_vocab(gguf)); }

Tokenizer Tokenizer::from_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return from_model_dir(path);
  if (!std::filesystem::exists(path, ec))
    fail("{}: no such file (expected tokenizer.json or a .gguf file)", path.string());
  char magic[4] = {};
  {
    std::ifstream in(path, std::ios::binary);
    in.read(magic, 4);
  }
  if (std::string_view(magic, 4) == "GGUF") return from_gguf(GgufFile::open(path));
  return from_spec(read_tokenizer_json(path));
}

Tokenizer Tokenizer::from_model_dir(const std::filesystem::path& dir) {
  return from_spec(read_model_dir_tokenizer(dir));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  const Impl& im = *impl_;
  std::string repaired;
  if (!utf8::is_valid(text)) {
    repaired = utf8::make_valid(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (options.add_special_tokens) ids = im.spec.prefix_ids;

  std::vector<AddedTokenMatcher::Piece> pieces;
  im.raw_added.split(text, options.parse_special, pieces);
  for (const AddedTokenMatcher::Piece& piece : pieces) {
    if (piece.id >= 0) {
      ids.push_back(piece.id);
    } else {
      im.encode_plain(text.substr(piece.begin, piece.end - piece.begin), piece.begin == 0,
                      options.parse_special, ids);
    }
  }
  if (options.add_special_tokens) ids.insert(ids.end(), im.spec.suffix_ids.begin(), im.spec.suffix_ids.end());
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  return impl_->decode(ids, skip_special, DecodeAt::Start);
}

std::string Tokenizer::decode_continuation(std::span<const int32_t> ids, bool skip_special) const {
  return impl_->decode(ids, skip_special, DecodeAt::Continuation);
}

std::string Tokenizer::token_bytes(int32_t id) const {
  const std::string& token = piece(id);
  if (token.empty()) return {};
  return impl_->decoder.decode({token}, true);
}

const std::string& Tokenizer::piece(int32_t id) const {
  impl_->check_id(id);
  return impl_->spec.tokens[static_cast<size_t>(id)];
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view piece) const {
  if (auto it = impl_->all_tokens.find(piece); it != impl_->all_tokens.end()) return it->second;
  return std::nullopt;
}

TokenKind Tokenizer::kind(int32_t id) const {
  impl_->check_id(id);
  return impl_->spec.kinds[static_cast<size_t>(id)];
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->spec.tokens.size()); }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->spec.bos_id; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->spec.eos_id; }
std::optional<int32_t> Tokenizer::pad_id() const { return impl_->spec.pad_id; }
std::optional<int32_t> Tokenizer::unk_id() const { return impl_->spec.unk_id; }
const std::vector<int32_t>& Tokenizer::eos_ids() const { return impl_->spec.eos_ids; }
bool Tokenizer::adds_bos() const {
  const auto& s = impl_->spec;
  return s.bos_id && !s.prefix_ids.empty() && s.prefix_ids.front() == *s.bos_id;
}
const std::string& Tokenizer::chat_template() const { return impl_->spec.chat_template; }
const std::string& Tokenizer::bos_token() const { return impl_->spec.bos_token; }
const std::string& Tokenizer::eos_token() const { return impl_->spec.eos_token; }
const std::string& Tokenizer::source() const { return impl_->spec.source; }

}  // namespace tokenmill
