// Seeded random token ids, for tests that need a prompt and do not care which.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace tokenmill::testing {

// `length` ids uniform in [0, vocab), the same for the same seed.
inline std::vector<int32_t> random_token_ids(int64_t length, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(length));
  for (auto& id : ids) id = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return ids;
}

}  // namespace tokenmill::testing
