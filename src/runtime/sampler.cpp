#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace tokenmill {

void SamplingParams::validate() const {
  if (!(temperature >= 0.0f) || !std::isfinite(temperature))
    fail("temperature must be >= 0, got {}", temperature);
  if (top_k < 0) fail("top-k must be >= 0, got {}", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) fail("top-p must be in (0, 1], got {}", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) fail("min-p must be in [0, 1], got {}", min_p);
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty))
    fail("repetition penalty must be > 0, got {}", repetition_penalty);
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) { params_.validate(); }

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history) {
  const auto vocab = static_cast<int32_t>(logits.size());
  if (params_.repetition_penalty != 1.0f) {
    // Each distinct token is penalised once, however often it occurred.
    penalized_.assign(logits.size(), false);
    for (int32_t id : history) {
      if (id < 0 || id >= vocab || penalized_[static_cast<size_t>(id)]) continue;
      penalized_[static_cast<size_t>(id)] = true;
      float& l = logits[static_cast<size_t>(id)];
      l = l > 0.0f ? l / params_.repetition_penalty : l * params_.repetition_penalty;
    }
  }
  if (params_.temperature == 0.0f)
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());

  candidates_.resize(logits.size());
  std::iota(candidates_.begin(), candidates_.end(), 0);
  const auto by_logit = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  size_t keep = candidates_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
    keep = static_cast<size_t>(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(keep),
                      candidates_.end(), by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  candidates_.resize(keep);

  // Softmax over the candidates at this temperature (sorted, so the first is the max).
  probabilities_.resize(keep);
  const float top = logits[static_cast<size_t>(candidates_[0])];
  double sum = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    const double p = std::exp(static_cast<double>(logits[static_cast<size_t>(candidates_[i])] - top) /
                              static_cast<double>(params_.temperature));
    probabilities_[i] = static_cast<float>(p);
    sum += p;
  }
  double cumulative = 0.0;
  size_t cut = keep;
  for (size_t i = 0; i < keep; ++i) {
    const double p = probabilities_[i] / sum;
    if (params_.min_p > 0.0f && p < params_.min_p * (probabilities_[0] / sum)) {
      cut = std::min(cut, i);
      break;
    }
    cumulative += p;
    if (params_.top_p < 1.0f && cumulative >= params_.top_p) {
      cut = i + 1;
      break;
    }
  }
  cut = std::max<size_t>(cut, 1);

  double kept_sum = 0.0;
  for (size_t i = 0; i < cut; ++i) kept_sum += probabilities_[i];
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * kept_sum;
  double running = 0.0;
  for (size_t i = 0; i < cut; ++i) {
    running += probabilities_[i];
    if (u < running) return candidates_[i];
  }
  return candidates_[cut - 1];
}

}  // namespace tokenmill
