// The backward of a mixture of experts' router (model/expert_routing.h), on the host, and
// transformers' load-balancing loss over all layers' routers.
//
// Routing weights from the router's scores s [tokens, experts], p = softmax(s) per token,
// e_j its j-th chosen expert (the selection is piecewise constant: no gradient through it):
//   not normalised:  w_j = p_{e_j}:      ds_m = p_m ([m chosen] dw_m - sum_j p_{e_j} dw_j)
//   normalised:      w_j = p_{e_j} / S:  the softmax over the chosen scores alone, so
//                    ds_{e_j} = w_j (dw_j - sum_i w_i dw_i), and 0 for the others.
//
// Load balancing (transformers' load_balancing_loss_func, no attention mask): over the N rows
// of every layer's router together (N = layers x tokens), with count_e the times expert e is
// chosen (any rank) and P_e = sum_n p[n, e],
//   aux = E sum_e (count_e / N) (P_e / N),  d aux / d p[n, e] = E count_e / N^2,
// which the softmax carries to the scores as ds_m = p_m (g_m - sum_e p_e g_e), g = d aux / d p.
// The model's loss adds router_aux_loss_coef x aux (transformers, with output_router_logits).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/expert_routing.h"

namespace tokenmill {

// dscores [tokens, experts] = d(loss)/d(scores) through the routing weights, given p (the
// router's probabilities) and dweights [tokens * k] (d(loss)/d(routing.weights), in choice
// order). Overwrites dscores.
void router_scores_backward(std::span<const float> p, const ExpertRouting& routing,
                            std::span<const float> dweights, bool normalized, std::span<float> dscores);

// The load-balancing loss's statistics, gathered layer by layer over one forward pass.
class LoadBalance {
 public:
  explicit LoadBalance(int64_t experts)
      : counts_(static_cast<size_t>(experts)), sums_(static_cast<size_t>(experts)) {}
  void clear();
  // One layer's routing and probabilities p [tokens, experts].
  void add(const ExpertRouting& routing, std::span<const float> p);
  // aux, once every layer was added.
  double loss() const;
  // dscores += scale x d aux / d scores for one layer's rows (its p), after every layer was added.
  void add_gradient(std::span<const float> p, float scale, std::span<float> dscores) const;

 private:
  std::vector<double> counts_, sums_;  // count_e and P_e
  double rows_ = 0;                    // N
};

}  // namespace tokenmill
