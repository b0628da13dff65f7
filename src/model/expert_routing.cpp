#include "model/expert_routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace tokenmill {

void router_probabilities(std::span<const float> scores, int64_t experts, std::span<float> p) {
  if (experts < 1 || scores.size() % static_cast<size_t>(experts) != 0 || p.size() != scores.size())
    fail("router probabilities: {} scores, {} outputs for {} experts", scores.size(), p.size(), experts);
  for (size_t row = 0; row < scores.size(); row += static_cast<size_t>(experts)) {
    const float* s = scores.data() + row;
    float* out = p.data() + row;
    const float top = *std::max_element(s, s + experts);
    float sum = 0.0f;
    for (int64_t e = 0; e < experts; ++e) sum += out[e] = std::exp(s[e] - top);
    for (int64_t e = 0; e < experts; ++e) out[e] /= sum;
  }
}

void route_to_experts(std::span<const float> scores, int64_t tokens, int64_t experts, int64_t k,
                      bool normalize, ExpertRouting& out) {
  if (k < 1 || k > experts) fail("expert routing: {} experts per token of {}", k, experts);
  if (tokens < 0 || static_cast<int64_t>(scores.size()) != tokens * experts)
    fail("expert routing: {} scores for {} tokens of {} experts", scores.size(), tokens, experts);
  out.tokens = tokens;
  out.experts = experts;
  out.k = k;
  const auto choices = static_cast<size_t>(tokens * k);
  out.chosen_experts.resize(choices);
  out.weights.resize(choices);
  out.slots.resize(choices);
  out.slot_tokens.resize(choices);
  out.expert_begin.assign(static_cast<size_t>(experts + 1), 0);

  std::vector<float>& p = out.probabilities;
  std::vector<int32_t>& order = out.order;
  p.resize(static_cast<size_t>(experts));
  order.resize(static_cast<size_t>(experts));
  for (int64_t t = 0; t < tokens; ++t) {
    router_probabilities(scores.subspan(static_cast<size_t>(t * experts), static_cast<size_t>(experts)),
                         experts, p);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      return p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)] ||
             (p[static_cast<size_t>(a)] == p[static_cast<size_t>(b)] && a < b);
    });
    float chosen_sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) chosen_sum += p[static_cast<size_t>(order[static_cast<size_t>(j)])];
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = order[static_cast<size_t>(j)];
      const auto c = static_cast<size_t>(t * k + j);
      out.chosen_experts[c] = e;
      out.weights[c] = normalize ? p[static_cast<size_t>(e)] / chosen_sum : p[static_cast<size_t>(e)];
      ++out.expert_begin[static_cast<size_t>(e) + 1];
    }
  }
  std::partial_sum(out.expert_begin.begin(), out.expert_begin.end(), out.expert_begin.begin());
  // Tokens visited in ascending order fill each expert's slots in ascending token order.
  std::vector<int64_t>& next = out.next_slot;
  next.assign(out.expert_begin.begin(), out.expert_begin.end() - 1);
  for (size_t c = 0; c < choices; ++c) {
    const int64_t slot = next[static_cast<size_t>(out.chosen_experts[c])]++;
    out.slots[c] = static_cast<int32_t>(slot);
    out.slot_tokens[static_cast<size_t>(slot)] = static_cast<int32_t>(c / static_cast<size_t>(k));
  }
}

}  // namespace tokenmill
