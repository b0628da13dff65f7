#include "serve/ngram_draft.h"

#include <algorithm>
#include <charconv>

#include "core/error.h"

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

NgramDraftOptions parse_speculative(std::string_view spec) {
  constexpr int64_t kMaxDraft = 16;
  NgramDraftOptions options;
  if (spec == "ngram") return options;
  if (spec.starts_with("draft:") || spec == "draft")
    fail("--speculative {}: a draft model is not supported; use ngram or ngram:N (prompt lookup)", spec);
  const std::string_view prefix = "ngram:";
  if (spec.starts_with(prefix)) {
    const std::string_view count = spec.substr(prefix.size());
    int64_t n = 0;
    const auto [end, error] = std::from_chars(count.data(), count.data() + count.size(), n);
    if (error == std::errc() && end == count.data() + count.size() && n >= 1 && n <= kMaxDraft) {
      options.max_tokens = n;
      return options;
    }
  }
  fail("--speculative {}: expected ngram or ngram:N with N from 1 to {} (tokens guessed per step)", spec,
       kMaxDraft);
}

}  // namespace tokenmill
