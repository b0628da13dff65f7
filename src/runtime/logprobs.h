// Log-probabilities of sampled tokens, as OpenAI's `logprobs` / `top_logprobs` report them.
//
// They are the model's own distribution: log_softmax of the raw logits of the step, before
// any penalty, temperature or truncation (vLLM's default "raw" logprobs), computed in
// double: logprob(i) = logits[i] - max - log(sum_j exp(logits[j] - max)).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tokenmill {

struct TopLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct TokenLogprob {
  int32_t token = 0;  // the token that was chosen
  float logprob = 0.0f;
  std::vector<TopLogprob> top;  // the `top_n` most likely tokens, most likely first (ties: lower id)
};

// The logprob of `token` and the `top_n` (0..20) most likely tokens under `logits`.
// Throws Error if `token` is outside the row or top_n is out of range.
TokenLogprob token_logprob(std::span<const float> logits, int32_t token, int32_t top_n);

}  // namespace tokenmill
