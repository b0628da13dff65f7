#include "model/weight_placement.h"

#include <map>

#include "core/error.h"

namespace tokenmill {

void for_each_op_weight(ModelWeights& w, const std::function<void(Tensor&)>& fn) {
  fn(w.token_embedding);
  fn(w.position_embedding);
  for (LayerWeights& l : w.layers) {
    for (Tensor* t : {&l.attn_norm_weight, &l.attn_norm_bias, &l.q, &l.k, &l.v, &l.o, &l.q_bias, &l.k_bias,
                      &l.v_bias, &l.o_bias, &l.mlp_norm_weight, &l.mlp_norm_bias, &l.gate, &l.gate_bias,
                      &l.up, &l.up_bias, &l.down, &l.down_bias})
      fn(*t);
  }
  fn(w.final_norm_weight);
  fn(w.final_norm_bias);
  fn(w.lm_head);
}

void place_weights(ModelWeights& weights, DeviceMemory& memory) {
  if (weights.memory == &memory || memory.is_host()) return;
  if (!weights.memory->is_host()) fail("the model's weights are already on another device");
  TensorStore placed(memory);
  std::map<const void*, Tensor> copies;  // by host address: a tied matrix is copied once
  for_each_op_weight(weights, [&](Tensor& t) {
    if (t.data == nullptr) return;
    auto [it, fresh] = copies.try_emplace(t.data);
    if (fresh) it->second = placed.copy_of(t);
    t = it->second;
  });
  weights.placed = std::move(placed);
  weights.memory = &memory;
}

bool weights_in(const ModelWeights& weights, const DeviceMemory& memory) {
  return weights.memory == &memory || (weights.memory->is_host() && memory.is_host());
}

}  // namespace tokenmill
