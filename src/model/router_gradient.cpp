#include "model/router_gradient.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tokenmill {

void router_scores_backward(std::span<const float> p, const ExpertRouting& r, std::span<const float> dweights,
                            bool normalized, std::span<float> dscores) {
  const int64_t experts = r.experts, k = r.k;
  const auto values = static_cast<size_t>(r.tokens * experts);
  if (p.size() != values || dscores.size() != values || dweights.size() != static_cast<size_t>(r.tokens * k))
    fail(
        "router backward: {} probabilities, {} score gradients, {} weight gradients for {} tokens x {} "
        "experts",
        p.size(), dscores.size(), dweights.size(), r.tokens, experts);
  std::fill(dscores.begin(), dscores.end(), 0.0f);
  for (int64_t t = 0; t < r.tokens; ++t) {
    const float* pt = p.data() + t * experts;
    float* ds = dscores.data() + t * experts;
    const float* w = r.weights.data() + t * k;
    const float* dw = dweights.data() + t * k;
    const int32_t* chosen = r.chosen_experts.data() + t * k;
    double dot = 0.0;  // sum_j w_j dw_j: the chosen weights, normalised or not
    for (int64_t j = 0; j < k; ++j) dot += static_cast<double>(w[j]) * dw[j];
    if (normalized) {
      for (int64_t j = 0; j < k; ++j) ds[chosen[j]] = static_cast<float>(w[j] * (dw[j] - dot));
      continue;
    }
    for (int64_t m = 0; m < experts; ++m) ds[m] = static_cast<float>(-pt[m] * dot);
    for (int64_t j = 0; j < k; ++j) ds[chosen[j]] += pt[chosen[j]] * dw[j];
  }
}

void LoadBalance::clear() {
  std::fill(counts_.begin(), counts_.end(), 0.0);
  std::fill(sums_.begin(), sums_.end(), 0.0);
  rows_ = 0;
}

void LoadBalance::add(const ExpertRouting& r, std::span<const float> p) {
  const auto experts = static_cast<int64_t>(counts_.size());
  if (r.experts != experts || p.size() != static_cast<size_t>(r.tokens * experts))
    fail("load balance: a routing of {} experts, {} probabilities for {} tokens", r.experts, p.size(),
         r.tokens);
  for (const int32_t e : r.chosen_experts) counts_[static_cast<size_t>(e)] += 1;
  for (size_t i = 0; i < p.size(); ++i) sums_[i % counts_.size()] += p[i];
  rows_ += static_cast<double>(r.tokens);
}

double LoadBalance::loss() const {
  if (rows_ == 0) return 0.0;
  double sum = 0.0;
  for (size_t e = 0; e < counts_.size(); ++e) sum += counts_[e] * sums_[e];
  return static_cast<double>(counts_.size()) * sum / (rows_ * rows_);
}

void LoadBalance::add_gradient(std::span<const float> p, float scale, std::span<float> dscores) const {
  const size_t experts = counts_.size();
  if (p.size() != dscores.size() || p.size() % experts != 0)
    fail("load balance: {} probabilities, {} score gradients", p.size(), dscores.size());
  if (rows_ == 0) return;
  // g_e = d aux / d p[n, e], the same for every row.
  const double factor = static_cast<double>(experts) / (rows_ * rows_);
  for (size_t row = 0; row < p.size(); row += experts) {
    const float* pr = p.data() + row;
    double mean = 0.0;  // sum_e p_e g_e
    for (size_t e = 0; e < experts; ++e) mean += pr[e] * factor * counts_[e];
    for (size_t e = 0; e < experts; ++e)
      dscores[row + e] += static_cast<float>(scale * pr[e] * (factor * counts_[e] - mean));
  }
}

}  // namespace tokenmill
