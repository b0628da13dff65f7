#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace tokenmill {

namespace {

// Orders token ids most likely first, ties to the lower id.
struct ByLogit {
  std::span<const float> logits;
  bool operator()(int32_t a, int32_t b) const {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  }
};

}  // namespace

void SamplingParams::validate() const {
  if (!(temperature >= 0.0f) || !std::isfinite(temperature))
    fail("temperature must be >= 0, got {}", temperature);
  if (top_k < 0) fail("top-k must be >= 0, got {}", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) fail("top-p must be in (0, 1], got {}", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) fail("min-p must be in [0, 1], got {}", min_p);
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty))
    fail("repetition penalty must be > 0, got {}", repetition_penalty);
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    fail("frequency_penalty must be in [-2, 2], got {}", frequency_penalty);
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    fail("presence_penalty must be in [-2, 2], got {}", presence_penalty);
  if (vocab_limit < 0) fail("the vocabulary limit must be >= 0, got {}", vocab_limit);
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) { params_.validate(); }

template <class Visit>
void Sampler::for_each_distinct(std::span<const int32_t> tokens, size_t vocab, Visit visit) {
  if (counts_.size() != vocab) counts_.assign(vocab, 0);
  const auto in_row = [vocab](int32_t id) { return id >= 0 && static_cast<size_t>(id) < vocab; };
  for (int32_t id : tokens)
    if (in_row(id)) ++counts_[static_cast<size_t>(id)];
  for (int32_t id : tokens) {
    if (!in_row(id)) continue;
    int32_t& count = counts_[static_cast<size_t>(id)];
    if (count == 0) continue;  // already visited
    visit(static_cast<size_t>(id), count);
    count = 0;
  }
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history, size_t prompt_length) {
  if (params_.vocab_limit > 0 && static_cast<size_t>(params_.vocab_limit) < logits.size())
    logits = logits.first(static_cast<size_t>(params_.vocab_limit));  // the rest is never chosen
  if (logits.empty()) fail("cannot sample from an empty row of logits");
  if (prompt_length > history.size())
    fail("the prompt length {} exceeds the {} tokens of the history", prompt_length, history.size());
  if (params_.repetition_penalty != 1.0f) {
    // Each distinct token is penalised once, however often it occurred.
    for_each_distinct(history, logits.size(), [&](size_t id, int32_t) {
      float& l = logits[id];
      l = l > 0.0f ? l / params_.repetition_penalty : l * params_.repetition_penalty;
    });
  }
  if (params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f) {
    for_each_distinct(history.subspan(prompt_length), logits.size(), [&](size_t id, int32_t count) {
      logits[id] -= params_.frequency_penalty * static_cast<float>(count) + params_.presence_penalty;
    });
  }
  if (params_.temperature == 0.0f)
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  return draw(logits);
}

void Sampler::sort_through(size_t i, std::span<const float> logits) {
  const ByLogit by_logit{logits};
  while (i >= sorted_) {
    // Chunks grow 4x; once past a quarter of the candidates, the rest is sorted at once.
    size_t end = std::min(kept_, std::max(4 * sorted_, kFirstSortedChunk));
    if (4 * end > kept_) end = kept_;
    if ((end - sorted_) * 16 < kept_ - sorted_) {
      // A heap of the chunk: most candidates cost one comparison with its top.
      std::partial_sort(candidate(sorted_), candidate(end), candidate(kept_), by_logit);
    } else {
      if (end < kept_) std::nth_element(candidate(sorted_), candidate(end), candidate(kept_), by_logit);
      std::sort(candidate(sorted_), candidate(end), by_logit);
    }
    sorted_ = end;
  }
}

int32_t Sampler::draw(std::span<const float> logits) {
  candidates_.resize(logits.size());
  std::iota(candidates_.begin(), candidates_.end(), 0);
  sorted_ = 0;
  kept_ = candidates_.size();
  const auto top_k = static_cast<size_t>(params_.top_k);
  if (top_k > 0 && top_k < kept_) {
    if (top_k <= kFirstSortedChunk) {
      sort_through(top_k - 1, logits);  // the top-k, sorted
    } else {
      std::nth_element(candidates_.begin(), candidate(top_k), candidates_.end(), ByLogit{logits});
    }
    kept_ = top_k;
    sorted_ = std::min(sorted_, kept_);
  }
  sort_through(0, logits);

  // Unnormalised probabilities at this temperature, by token id: 1 for the most likely.
  weights_.resize(logits.size());
  const float top = logits[static_cast<size_t>(candidates_[0])];
  double total = 0.0;
  for (size_t i = 0; i < kept_; ++i) {
    const auto id = static_cast<size_t>(candidates_[i]);
    weights_[id] = static_cast<float>(
        std::exp(static_cast<double>(logits[id] - top) / static_cast<double>(params_.temperature)));
    total += weights_[id];
  }
  const auto weight = [&](size_t i) {
    return static_cast<double>(weights_[static_cast<size_t>(candidates_[i])]);
  };

  size_t cut = kept_;  // top-p and min-p keep the first `cut` tokens, whose weights sum to kept_sum
  double kept_sum = total;
  if (params_.top_p < 1.0f || params_.min_p > 0.0f) {
    double cumulative = 0.0;
    for (size_t i = 0; i < kept_; ++i) {
      sort_through(i, logits);
      const double w = weight(i);
      if (w < params_.min_p) {  // p < min_p * p_top, as the top weight is 1; never the first
        cut = i;
        break;
      }
      cumulative += w;
      if (params_.top_p < 1.0f && cumulative / total >= params_.top_p) {
        cut = i + 1;
        break;
      }
    }
    kept_sum = cumulative;
  }

  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * kept_sum;
  double running = 0.0;
  for (size_t i = 0; i < cut; ++i) {
    sort_through(i, logits);
    running += weight(i);
    if (u < running) return candidates_[i];
  }
  return candidates_[cut - 1];
}

}  // namespace tokenmill
