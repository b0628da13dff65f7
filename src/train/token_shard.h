// Token shards: the training data on disk, one flat stream of token ids per file.
//
// File layout (little-endian), a 64-byte header then the tokens:
//   offset  0  8 bytes  magic "TMTOKENS"
//   offset  8  u32      format version (1)
//   offset 12  u32      bytes per token: 2 (u16, vocab <= 65536) or 4 (u32)
//   offset 16  u64      token count
//   offset 24  u32      vocabulary size: every token is < this
//   offset 28  u32      end-of-document token id (documents are joined with it)
//   offset 32  u64      FNV-1a 64-bit hash of the token bytes (detects corruption)
//   offset 40  24 bytes zero (reserved)
//   offset 64  count * bytes-per-token token bytes; the file ends there.
// A reader checks every field (magic, version, width, size = 64 + count * width exactly,
// vocabulary, hash, every token < vocabulary) and names the file and the field on error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "core/mapped_file.h"

namespace tokenmill {

struct TokenShardInfo {
  uint32_t bytes_per_token = 2;
  uint64_t count = 0;
  uint32_t vocab_size = 0;
  uint32_t eod_token = 0;
};

inline constexpr uint64_t kTokenShardHeaderBytes = 64;

// Writes `tokens` atomically (core/atomic_file.h), 2 bytes per token when the vocabulary
// allows it. Throws Error if a token is negative or >= vocab_size, or eod_token is.
void write_token_shard(const std::filesystem::path& path, std::span<const int32_t> tokens,
                       uint32_t vocab_size, uint32_t eod_token);

// A validated shard, memory-mapped.
class TokenShard {
 public:
  explicit TokenShard(const std::filesystem::path& path);

  const TokenShardInfo& info() const { return info_; }
  int64_t size() const { return static_cast<int64_t>(info_.count); }
  int32_t token(int64_t i) const;
  // Tokens [begin, begin + out.size()) into out; throws Error if the range leaves the shard.
  void read(int64_t begin, std::span<int32_t> out) const;
  const std::filesystem::path& path() const { return file_.path(); }

 private:
  MappedFile file_;
  TokenShardInfo info_;
  const std::byte* tokens_ = nullptr;
};

// The header fields and the validation of a whole shard image (exposed for the fuzz test).
TokenShardInfo parse_token_shard(std::span<const std::byte> bytes, const std::filesystem::path& path);

}  // namespace tokenmill
