// Prompt lookup ("n-gram") drafting for speculative decoding: a sequence often repeats
// what it has already seen (code being edited, quoted passages, lists, structured output),
// so the tokens that followed an earlier occurrence of its last few tokens are a cheap
// guess at what comes next. The step then runs the guess as extra query rows and keeps
// the longest prefix that the model itself would have produced (serve/engine.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tokenmill {

struct NgramDraftOptions {
  int64_t max_tokens = 4;  // longest draft
  int64_t max_ngram = 3;   // longest suffix looked up; shorter ones are tried next, down to 1
};

// The tokens that followed the most recent earlier occurrence of the last n tokens of
// `tokens`, for the largest n <= max_ngram that occurs earlier, at most max_tokens of them
// (fewer when the occurrence is close to the end); empty when no suffix occurs earlier or
// max_tokens < 1.
std::vector<int32_t> ngram_draft(std::span<const int32_t> tokens, const NgramDraftOptions& options);

}  // namespace tokenmill
