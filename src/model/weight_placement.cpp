#include "model/weight_placement.h"

#include <map>
#include <set>

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

std::vector<Tensor> mapped_op_weights(ModelWeights& weights) {
  std::vector<Tensor> mapped;
  std::set<const void*> seen;
  for_each_op_weight(weights, [&](Tensor& t) {
    if (t.data == nullptr || weights.owned.owns(t.data) || weights.placed.owns(t.data)) return;
    if (seen.insert(t.data).second) mapped.push_back(t);
  });
  return mapped;
}

void copy_mapped_weights(ModelWeights& weights) {
  if (!weights.memory->is_host()) fail("the model's weights are on a device, not in host memory");
  const std::vector<Tensor> mapped = mapped_op_weights(weights);
  const std::vector<Tensor> copies = weights.placed.copies_of(mapped);
  std::map<const void*, const Tensor*> copy_of;
  for (size_t i = 0; i < mapped.size(); ++i) copy_of[mapped[i].data] = &copies[i];
  for_each_op_weight(weights, [&](Tensor& t) {
    const auto it = copy_of.find(t.data);
    if (t.data != nullptr && it != copy_of.end()) t = *it->second;
  });
}

bool weights_in(const ModelWeights& weights, const DeviceMemory& memory) {
  return weights.memory == &memory || (weights.memory->is_host() && memory.is_host());
}

}  // namespace tokenmill
