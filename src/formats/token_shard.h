// Token shards: the training data on disk, one flat stream of token ids per file.
//
// File layout (little-endian), a 64-byte header, the tokens, then an optional loss mask:
//   offset  0  8 bytes  magic "TMTOKENS"
//   offset  8  u32      format version (2; version 1 files are read too)
//   offset 12  u32      bytes per token: 2 (u16, vocab <= 65536) or 4 (u32)
//   offset 16  u64      token count
//   offset 24  u32      vocabulary size: every token is < this
//   offset 28  u32      end-of-document token id (documents are joined with it)
//   offset 32  u64      FNV-1a 64-bit hash of everything after the header (tokens and mask)
//   offset 40  u32      flags (version 2): bit 0 = a loss mask follows the tokens; other bits 0
//   offset 44  20 bytes zero (reserved)
//   offset 64  count * bytes-per-token token bytes
//   then, if flag bit 0: ceil(count / 8) mask bytes; token i is scored (its prediction counts
//              in the loss) iff bit i % 8 (least significant first) of byte i / 8 is set; the
//              unused high bits of the last byte are 0. Without a mask every token is scored.
// The file ends there. Version 1 is the same layout without flags (bytes 40..63 unread, no
// mask), so a version 2 file without a mask differs from version 1 only in the version field.
// A reader checks every field (magic, version, width, flags, reserved bytes, size exactly as
// above with overflow-checked arithmetic, vocabulary, hash, every token < vocabulary, the
// mask's padding bits) and names the file and the field on error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <vector>

#include "core/mapped_file.h"

namespace tokenmill {

struct TokenShardInfo {
  uint32_t bytes_per_token = 2;
  uint64_t count = 0;
  uint32_t vocab_size = 0;
  uint32_t eod_token = 0;
  bool loss_mask = false;  // a mask section follows the tokens
};

inline constexpr uint64_t kTokenShardHeaderBytes = 64;

// Writes `tokens` atomically (core/atomic_file.h) as version 2, 2 bytes per token when the
// vocabulary allows it. `scored` (one 0/1 entry per token) adds the loss-mask section; without
// it there is none. Throws Error if a token is negative or >= vocab_size, or eod_token is, or
// `scored` has a different length or an entry other than 0 or 1.
void write_token_shard(const std::filesystem::path& path, std::span<const int32_t> tokens,
                       uint32_t vocab_size, uint32_t eod_token,
                       std::optional<std::span<const uint8_t>> scored = std::nullopt);

// A validated shard, memory-mapped.
class TokenShard {
 public:
  explicit TokenShard(const std::filesystem::path& path);

  const TokenShardInfo& info() const { return info_; }
  int64_t size() const { return static_cast<int64_t>(info_.count); }
  int32_t token(int64_t i) const;
  // Tokens [begin, begin + out.size()) into out; throws Error if the range leaves the shard.
  void read(int64_t begin, std::span<int32_t> out) const;
  // Whether tokens [begin, begin + out.size()) are scored, as 1 or 0 into out (all 1 without
  // a mask); throws Error if the range leaves the shard.
  void read_scored(int64_t begin, std::span<uint8_t> out) const;
  const std::filesystem::path& path() const { return file_.path(); }

 private:
  MappedFile file_;
  TokenShardInfo info_;
  void check_range(int64_t begin, int64_t n) const;

  const std::byte* tokens_ = nullptr;
  const std::byte* mask_ = nullptr;  // null without a mask section
};

// The header fields and the validation of a whole shard image (exposed for the fuzz test).
TokenShardInfo parse_token_shard(std::span<const std::byte> bytes, const std::filesystem::path& path);

}  // namespace tokenmill
