#include "runtime/logprobs.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tokenmill {

namespace {

constexpr int32_t kMaxTopLogprobs = 20;  // OpenAI's limit for top_logprobs

// The `n` ids with the largest logits, largest first, ties to the lower id (logprobs not
// yet filled in): one pass that keeps a sorted list of at most n (<= 20) entries, so
// O(vocab * n) at worst and O(vocab) when, as usual, few ids displace the current n-th.
std::vector<TopLogprob> top_ids(std::span<const float> logits, size_t n) {
  std::vector<TopLogprob> top;
  if (n == 0) return top;
  top.reserve(n + 1);
  const auto logit = [&](const TopLogprob& t) { return logits[static_cast<size_t>(t.token)]; };
  for (size_t i = 0; i < logits.size(); ++i) {
    // Ids arrive in increasing order, so an equal logit never displaces an earlier id.
    if (top.size() == n && !(logits[i] > logit(top.back()))) continue;
    const auto at =
        std::find_if(top.begin(), top.end(), [&](const TopLogprob& t) { return logits[i] > logit(t); });
    top.insert(at, TopLogprob{static_cast<int32_t>(i), 0.0f});
    if (top.size() > n) top.pop_back();
  }
  return top;
}

}  // namespace

TokenLogprob token_logprob(std::span<const float> logits, int32_t token, int32_t top_n) {
  if (token < 0 || static_cast<size_t>(token) >= logits.size())
    fail("token {} is outside the vocabulary of {} logits", token, logits.size());
  if (top_n < 0 || top_n > kMaxTopLogprobs)
    fail("top_logprobs must be in [0, {}], got {}", kMaxTopLogprobs, top_n);

  // log(sum_j exp(logits[j])) = max + log(sum_j exp(logits[j] - max)): every term is <= 1,
  // so nothing overflows, and the max contributes exactly 1.
  double max = -INFINITY;
  for (float l : logits) max = std::max(max, static_cast<double>(l));
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
  const double log_sum = std::log(sum);
  const auto logprob = [&](float l) { return static_cast<float>(static_cast<double>(l) - max - log_sum); };

  TokenLogprob result;
  result.token = token;
  result.logprob = logprob(logits[static_cast<size_t>(token)]);
  result.top = top_ids(logits, static_cast<size_t>(top_n));
  for (TopLogprob& t : result.top) t.logprob = logprob(logits[static_cast<size_t>(t.token)]);
  return result;
}

}  // namespace tokenmill
