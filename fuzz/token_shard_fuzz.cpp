// libFuzzer target for the token-shard reader (formats/token_shard.h).
//
// parse_token_shard must accept a well-formed shard or throw tokenmill::Error; any other
// exception, a crash, or a sanitizer report is a bug. Each input is parsed twice: as is, and
// with the header hash rewritten to match the body, because a random mutation almost never
// keeps the FNV-1a hash right and the checks after it (tokens inside the vocabulary, the
// loss mask's padding bits) would otherwise hardly ever run. Whatever is accepted must
// describe exactly the input's bytes, every token inside the vocabulary.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "core/error.h"
#include "core/fnv1a.h"
#include "formats/token_shard.h"

namespace {

constexpr size_t kHashOffset = 32;

uint64_t load_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Parses `data` and, if accepted, checks the result against the file layout by hand.
void parse_and_check(const uint8_t* data, size_t size) {
  try {
    const tokenmill::TokenShardInfo info = tokenmill::parse_token_shard(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size), "fuzz input");
    if (info.bytes_per_token != 2 && info.bytes_per_token != 4) __builtin_trap();
    if (info.eod_token >= info.vocab_size) __builtin_trap();
    // The header is followed by exactly the tokens and, if flagged, the mask.
    const size_t body = size - tokenmill::kTokenShardHeaderBytes;
    const uint64_t mask_bytes = info.loss_mask ? (info.count + 7) / 8 : 0;
    if (info.count > body / info.bytes_per_token) __builtin_trap();
    if (info.count * info.bytes_per_token + mask_bytes != body) __builtin_trap();
    if (load_u64(data + kHashOffset) != tokenmill::fnv1a(data + tokenmill::kTokenShardHeaderBytes, body))
      __builtin_trap();
    const uint8_t* tokens = data + tokenmill::kTokenShardHeaderBytes;
    for (uint64_t i = 0; i < info.count; ++i) {
      uint32_t t = 0;
      std::memcpy(&t, tokens + i * info.bytes_per_token, info.bytes_per_token);  // little-endian host
      if (t >= info.vocab_size) __builtin_trap();
    }
    if (info.loss_mask && info.count % 8 != 0 && (data[size - 1] >> (info.count % 8)) != 0) __builtin_trap();
  } catch (const tokenmill::Error&) {
    // Refusing bad input is the expected outcome.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  parse_and_check(data, size);
  if (size >= tokenmill::kTokenShardHeaderBytes) {
    std::vector<uint8_t> rehashed(data, data + size);
    const uint64_t hash = tokenmill::fnv1a(rehashed.data() + tokenmill::kTokenShardHeaderBytes,
                                           size - tokenmill::kTokenShardHeaderBytes);
    std::memcpy(rehashed.data() + kHashOffset, &hash, sizeof hash);
    parse_and_check(rehashed.data(), rehashed.size());
  }
  return 0;
}
