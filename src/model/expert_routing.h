// Routing the tokens of a step to a mixture of experts (ModelConfig::num_experts), from the
// router's scores: which experts each token runs, with which weights, and the order the
// experts' inputs are gathered in (all of an expert's tokens together, so each expert runs
// one matmul over its tokens).
//
// Per token, as transformers' Mixtral and Qwen3-MoE routers: p = softmax(scores) over all
// experts (in f32, the maximum subtracted first); the k experts of largest p, ties to the
// lower index, in descending p; their weights p, divided by their sum when `normalize`.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tokenmill {

struct ExpertRouting {
  int64_t tokens = 0, experts = 0, k = 0;
  // Token t's choice j (j < k, best first): its expert, its weight, and its slot, the row it
  // is gathered into: [tokens * k] each.
  std::vector<int32_t> chosen_experts;
  std::vector<float> weights;
  std::vector<int32_t> slots;
  // The token gathered into each slot [tokens * k]: expert 0's tokens first, in ascending
  // token order, then expert 1's, ...; expert e's slots are [expert_begin[e],
  // expert_begin[e + 1]) ([experts + 1]).
  std::vector<int32_t> slot_tokens;
  std::vector<int64_t> expert_begin;
  // route_to_experts' scratch, kept so that routing a step allocates nothing once grown.
  std::vector<float> probabilities;
  std::vector<int32_t> order;
  std::vector<int64_t> next_slot;
};

// p = softmax(scores) of each row of `experts` scores, as the routing computes it (f32, the
// maximum subtracted first), into `p` (of the size of scores).
void router_probabilities(std::span<const float> scores, int64_t experts, std::span<float> p);

// Routes `tokens` tokens whose router scores are `scores` [tokens, experts] (row-major) to k
// experts each, into `out` (its vectors reused). Throws Error unless 1 <= k <= experts and
// the scores hold tokens * experts values.
void route_to_experts(std::span<const float> scores, int64_t tokens, int64_t experts, int64_t k,
                      bool normalize, ExpertRouting& out);

}  // namespace tokenmill
