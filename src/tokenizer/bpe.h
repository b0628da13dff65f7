// BpeModel: turns one pre-tokenized word into token ids with byte-pair merges, exactly as
// HF tokenizers' BPE model does (lowest merge rank first, leftmost first among equals).
//
// Merge ranks come from an explicit merge list, or (SentencePiece vocabularies in GGUF,
// which carry scores instead) from the vocabulary: a pair may merge if its concatenation is
// a Normal token, and higher-scoring results merge first.
// Characters missing from the vocabulary become <0xNN> byte tokens (byte_fallback) or the
// unk token (consecutive ones fused if fuse_unk), or are dropped when neither exists.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer_spec.h"

namespace tokenmill {

// Hash for heterogeneous (string_view) lookups in string-keyed unordered maps.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  // Builds the lookup tables; throws Error (naming spec.source) on a merge that refers to
  // a token missing from the vocabulary.
  explicit BpeModel(const TokenizerSpec& spec);

  // Appends the ids of `word` (valid UTF-8) to `out`.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  // The model-vocabulary id of `token` (special and added tokens excluded).
  std::optional<int32_t> find(std::string_view token) const;

 private:
  struct Merge {
    uint32_t rank;
    int32_t result;
  };
  // Open-addressing table keyed by the (left, right) id pair.
  struct MergeTable {
    std::vector<uint64_t> keys;  // kEmpty marks a free slot
    std::vector<Merge> values;
    uint64_t mask = 0;
    void reserve(size_t n);
    void insert(int32_t left, int32_t right, Merge merge);
    const Merge* find(int32_t left, int32_t right) const;
  };

  int32_t char_id(std::string_view ch, char32_t cp) const;
  // Runs the merges on `word` (no ignore_merges shortcut, no chunking).
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  // True if no token of the vocabulary holds `left` immediately followed by `right`, so no
  // merge can ever join symbols across that boundary.
  bool is_cut_point(char32_t left, char32_t right) const;
  void build_rank_merges(const TokenizerSpec& spec);
  void build_score_merges(const TokenizerSpec& spec);

  TokenMap vocab_;
  std::vector<int32_t> bmp_ids_;       // id of each single character below U+10000, or -1
  std::array<int32_t, 256> byte_ids_;  // id of <0xNN>, or -1
  MergeTable merges_;
  std::vector<uint64_t> inner_pairs_;  // sorted (left << 32 | right) code point pairs in tokens
  std::optional<int32_t> unk_id_;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
};

}  // namespace tokenmill
