#include "formats/token_shard.h"

#include <cstring>
#include <string>

#include "core/atomic_file.h"
#include "core/checked_math.h"
#include "core/error.h"
#include "core/fnv1a.h"

namespace tokenmill {

namespace {

constexpr char kMagic[8] = {'T', 'M', 'T', 'O', 'K', 'E', 'N', 'S'};
constexpr uint32_t kVersion = 2;
constexpr uint32_t kFlagLossMask = 1;
constexpr size_t kFlagsOffset = 40, kReservedOffset = 44;

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
void store(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

uint32_t token_at(const std::byte* tokens, uint32_t width, uint64_t i) {
  return width == 2 ? load<uint16_t>(tokens + 2 * i) : load<uint32_t>(tokens + 4 * i);
}

uint64_t mask_bytes(uint64_t count) { return count / 8 + (count % 8 != 0 ? 1 : 0); }

bool scored_at(const std::byte* mask, uint64_t i) {
  return (std::to_integer<unsigned>(mask[i / 8]) >> (i % 8) & 1u) != 0;
}

}  // namespace

void write_token_shard(const std::filesystem::path& path, std::span<const int32_t> tokens,
                       uint32_t vocab_size, uint32_t eod_token,
                       std::optional<std::span<const uint8_t>> scored) {
  if (vocab_size == 0) fail("{}: the vocabulary size must be positive", path.string());
  if (eod_token >= vocab_size)
    fail("{}: end-of-document token {} is outside the vocabulary of {}", path.string(), eod_token,
         vocab_size);
  const uint32_t width = vocab_size <= 65536 ? 2 : 4;
  std::vector<std::byte> body(checked_mul(tokens.size(), width, path.string()));
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    if (t < 0 || static_cast<uint32_t>(t) >= vocab_size)
      fail("{}: token {} at position {} is outside the vocabulary of {}", path.string(), t, i, vocab_size);
    if (width == 2) {
      store(body.data() + 2 * i, static_cast<uint16_t>(t));
    } else {
      store(body.data() + 4 * i, static_cast<uint32_t>(t));
    }
  }
  if (scored) {
    if (scored->size() != tokens.size())
      fail("{}: the loss mask has {} entries for {} tokens", path.string(), scored->size(), tokens.size());
    const size_t mask_at = body.size();
    body.resize(mask_at + mask_bytes(tokens.size()));
    for (size_t i = 0; i < tokens.size(); ++i) {
      const uint8_t s = (*scored)[i];
      if (s > 1) fail("{}: loss mask entry {} at position {} is not 0 or 1", path.string(), s, i);
      body[mask_at + i / 8] |= std::byte{static_cast<uint8_t>(s << (i % 8))};
    }
  }
  std::byte header[kTokenShardHeaderBytes] = {};
  std::memcpy(header, kMagic, sizeof kMagic);
  store(header + 8, kVersion);
  store(header + 12, width);
  store(header + 16, static_cast<uint64_t>(tokens.size()));
  store(header + 24, vocab_size);
  store(header + 28, eod_token);
  store(header + 32, fnv1a(body.data(), body.size()));
  store(header + kFlagsOffset, scored ? kFlagLossMask : uint32_t{0});
  AtomicFile file(path);
  file.write(header, sizeof header);
  file.write(body.data(), body.size());
  file.commit();
}

TokenShardInfo parse_token_shard(std::span<const std::byte> bytes, const std::filesystem::path& path) {
  const std::string name = path.string();
  if (bytes.size() < kTokenShardHeaderBytes)
    fail("{}: not a token shard ({} bytes, shorter than the {}-byte header)", name, bytes.size(),
         kTokenShardHeaderBytes);
  const std::byte* h = bytes.data();
  if (std::memcmp(h, kMagic, sizeof kMagic) != 0)
    fail("{}: not a token shard (bad magic; expected \"TMTOKENS\"; make shards with `tokenmill prepare`)",
         name);
  const auto version = load<uint32_t>(h + 8);
  if (version != 1 && version != kVersion)
    fail("{}: token shard version {} is not supported (this build reads versions 1 and {})", name, version,
         kVersion);
  TokenShardInfo info;
  if (version == kVersion) {
    const auto flags = load<uint32_t>(h + kFlagsOffset);
    if ((flags & ~kFlagLossMask) != 0)
      fail("{}: unknown header flags {:#x} (this build knows only the loss-mask flag 0x1)", name, flags);
    for (size_t i = kReservedOffset; i < kTokenShardHeaderBytes; ++i)
      if (h[i] != std::byte{0}) fail("{}: reserved header byte {} is not zero (damaged file)", name, i);
    info.loss_mask = (flags & kFlagLossMask) != 0;
  }
  info.bytes_per_token = load<uint32_t>(h + 12);
  info.count = load<uint64_t>(h + 16);
  info.vocab_size = load<uint32_t>(h + 24);
  info.eod_token = load<uint32_t>(h + 28);
  if (info.bytes_per_token != 2 && info.bytes_per_token != 4)
    fail("{}: bytes per token is {} (must be 2 or 4)", name, info.bytes_per_token);
  if (info.vocab_size == 0 || (info.bytes_per_token == 2 && info.vocab_size > 65536))
    fail("{}: vocabulary size {} does not fit {} bytes per token", name, info.vocab_size,
         info.bytes_per_token);
  if (info.eod_token >= info.vocab_size)
    fail("{}: end-of-document token {} is outside the vocabulary of {}", name, info.eod_token,
         info.vocab_size);
  const uint64_t token_bytes = checked_mul(info.count, info.bytes_per_token, name);
  const uint64_t expected = checked_add(checked_add(kTokenShardHeaderBytes, token_bytes, name),
                                        info.loss_mask ? mask_bytes(info.count) : 0, name);
  if (expected != bytes.size())
    fail("{}: the header says {} tokens{} ({} bytes) but the file has {} bytes (truncated or damaged)", name,
         info.count, info.loss_mask ? " and a loss mask" : "", expected, bytes.size());
  const std::span<const std::byte> body = bytes.subspan(kTokenShardHeaderBytes);
  if (fnv1a(body.data(), body.size()) != load<uint64_t>(h + 32))
    fail("{}: token data does not match its hash (damaged file)", name);
  for (uint64_t i = 0; i < info.count; ++i)
    if (const uint32_t t = token_at(body.data(), info.bytes_per_token, i); t >= info.vocab_size)
      fail("{}: token {} at position {} is outside the vocabulary of {}", name, t, i, info.vocab_size);
  if (info.loss_mask && info.count % 8 != 0 &&
      (std::to_integer<unsigned>(body.back()) >> (info.count % 8)) != 0)
    fail("{}: the loss mask sets bits past the last token (damaged file)", name);
  return info;
}

TokenShard::TokenShard(const std::filesystem::path& path) : file_(path) {
  info_ = parse_token_shard(file_.bytes(), path);
  tokens_ = file_.bytes().data() + kTokenShardHeaderBytes;
  if (info_.loss_mask) mask_ = tokens_ + info_.count * info_.bytes_per_token;
}

void TokenShard::check_range(int64_t begin, int64_t n) const {
  if (begin < 0 || n > size() || begin > size() - n)
    fail("{}: tokens [{}, {}) outside [0, {})", path().string(), begin, begin + n, size());
}

int32_t TokenShard::token(int64_t i) const {
  if (i < 0 || i >= size()) fail("{}: token index {} outside [0, {})", path().string(), i, size());
  return static_cast<int32_t>(token_at(tokens_, info_.bytes_per_token, static_cast<uint64_t>(i)));
}

void TokenShard::read(int64_t begin, std::span<int32_t> out) const {
  const auto n = static_cast<int64_t>(out.size());
  check_range(begin, n);
  for (int64_t i = 0; i < n; ++i)
    out[static_cast<size_t>(i)] =
        static_cast<int32_t>(token_at(tokens_, info_.bytes_per_token, static_cast<uint64_t>(begin + i)));
}

void TokenShard::read_scored(int64_t begin, std::span<uint8_t> out) const {
  const auto n = static_cast<int64_t>(out.size());
  check_range(begin, n);
  for (int64_t i = 0; i < n; ++i)
    out[static_cast<size_t>(i)] =
        mask_ == nullptr || scored_at(mask_, static_cast<uint64_t>(begin + i)) ? 1 : 0;
}

}  // namespace tokenmill
