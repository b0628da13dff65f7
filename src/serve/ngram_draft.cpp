#include "serve/ngram_draft.h"

#include <algorithm>

namespace tokenmill {

std::vector<int32_t> ngram_draft(std::span<const int32_t> tokens, const NgramDraftOptions& options) {
  const auto length = static_cast<int64_t>(tokens.size());
  if (options.max_tokens < 1) return {};
  for (int64_t n = std::min(options.max_ngram, length - 1); n >= 1; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(static_cast<size_t>(length - n));
    // An earlier occurrence starts at i < length - n; the most recent first.
    for (int64_t i = length - n - 1; i >= 0; --i) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + i)) continue;
      const int64_t from = i + n, to = std::min(length, from + options.max_tokens);
      return {tokens.begin() + from, tokens.begin() + to};
    }
  }
  return {};
}

}  // namespace tokenmill
