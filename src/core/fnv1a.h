// FNV-1a, 64-bit: a cheap, portable hash that file formats store to detect truncation or
// damage (token shards, checkpoints). Not cryptographic. `h` chains several buffers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tokenmill {

inline constexpr uint64_t kFnv1aOffsetBasis = 0xcbf29ce484222325ull;

inline uint64_t fnv1a(const void* data, size_t n, uint64_t h = kFnv1aOffsetBasis) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace tokenmill
