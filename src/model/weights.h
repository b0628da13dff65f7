// ModelWeights: every tensor the transformer forward reads, in the engine's layout.
//
// Engine layout: linear weights are [out_features, in_features] (Hugging Face Linear);
// GPT-2's Conv1D weights ([in, out]) are transposed at load and its fused c_attn is
// split into q, k, v. Large matrices stay in the mapped file (f32/bf16/f16); norm weights
// and biases are converted to f32. An absent optional tensor has data == nullptr.
// GGUF files map onto the same struct (model/gguf_model.h).
#pragma once

#include <array>
#include <initializer_list>
#include <vector>

#include "core/tensor.h"
#include "core/tensor_store.h"
#include "formats/safetensors.h"
#include "model/model_config.h"

namespace tokenmill {

// With config.post_norms the attn / mlp norms apply to the attention's and the MLP's outputs.
struct LayerWeights {
  Tensor attn_norm_weight, attn_norm_bias;  // bias: LayerNorm only
  Tensor q, k, v, o;
  Tensor q_bias, k_bias, v_bias, o_bias;
  Tensor q_norm_weight, k_norm_weight;  // config.qk_norm's: [q_norm_width()], [k_norm_width()]
  Tensor mlp_norm_weight, mlp_norm_bias;
  Tensor attn_post_norm_weight, mlp_post_norm_weight;  // config.sandwich_norms: after each block
  Tensor gate, gate_bias;                              // SwiGLU and GeGLU only
  Tensor up, up_bias;                                  // GPT-2: c_fc
  Tensor down, down_bias;                              // GPT-2: mlp.c_proj
  // Mixture of experts (config.mixture_of_experts(), instead of gate, up and down): the
  // router [experts, hidden], and the experts' matrices stacked, expert e's rows after
  // expert e - 1's: expert_gate, expert_up [experts * expert_ff, hidden], expert_down
  // [experts * hidden, expert_ff] (expert_matrix() views one).
  Tensor router;
  Tensor expert_gate, expert_up, expert_down;
  // With config.mlp_bias (gpt-oss): f32 [experts], and the experts' stacked biases, expert e's
  // after expert e - 1's: [experts * expert_ff], [experts * expert_ff], [experts * hidden].
  Tensor router_bias, expert_gate_bias, expert_up_bias, expert_down_bias;
  Tensor attn_sinks;  // config.attention_sinks: f32 [heads]
};

// Expert e's part of stacked expert biases (LayerWeights::expert_gate_bias, ...).
inline Tensor expert_vector(const Tensor& stacked, int64_t e, int64_t experts) {
  const int64_t n = stacked.numel() / experts;
  return stacked.reshaped({experts, n}).slice_rows(e, 1).reshaped({n});
}

// Expert e's matrix of stacked expert matrices (LayerWeights::expert_gate, ...).
inline Tensor expert_matrix(const Tensor& stacked, int64_t e, int64_t experts) {
  const int64_t rows = stacked.rows() / experts;
  return stacked.slice_rows(e * rows, rows);
}

struct ModelWeights {
  Tensor token_embedding;     // [vocab, hidden]
  Tensor position_embedding;  // [positions, hidden], learned positions only
  std::vector<LayerWeights> layers;
  Tensor final_norm_weight, final_norm_bias;
  Tensor lm_head;  // [vocab, hidden]; the token embedding when tied
  // GGUF llama 3 files: f32 [head_dim / 2]; rotary pair j turns at inv_freq[j] / factor[j].
  Tensor rope_freq_factors;
  TensorStore owned;
  // Where the tensors the forward ops read live: host memory (the mapped file and `owned`),
  // or the backend memory that place_weights (model/weight_placement.h) copied them into,
  // held by `placed`; host copies of mapped weights (copy_mapped_weights) are in `placed` too.
  DeviceMemory* memory = &host_memory();
  TensorStore placed;
};

// Calls fn(tensor) on every tensor of a layer, absent optional ones included (data ==
// nullptr), in one fixed order: the one list of a layer's fields, which parameter counts,
// weight placement and traffic go through, so a new field is added here and where it is
// loaded. `Layer` is LayerWeights or const LayerWeights.
template <typename Layer, typename Fn>
void for_each_layer_tensor(Layer& l, Fn&& fn) {
  for (auto* t : {&l.attn_norm_weight,
                  &l.attn_norm_bias,
                  &l.q,
                  &l.k,
                  &l.v,
                  &l.o,
                  &l.q_bias,
                  &l.k_bias,
                  &l.v_bias,
                  &l.o_bias,
                  &l.q_norm_weight,
                  &l.k_norm_weight,
                  &l.mlp_norm_weight,
                  &l.mlp_norm_bias,
                  &l.attn_post_norm_weight,
                  &l.mlp_post_norm_weight,
                  &l.gate,
                  &l.gate_bias,
                  &l.up,
                  &l.up_bias,
                  &l.down,
                  &l.down_bias,
                  &l.router,
                  &l.expert_gate,
                  &l.expert_up,
                  &l.expert_down,
                  &l.router_bias,
                  &l.expert_gate_bias,
                  &l.expert_up_bias,
                  &l.expert_down_bias,
                  &l.attn_sinks})
    fn(*t);
}

// Calls fn(tensor) on every tensor the forward ops read, absent optional tensors included
// (their data is null). A tied lm_head is visited like any other: its data equals the
// embedding's. `Weights` is ModelWeights or const ModelWeights.
template <typename Weights, typename Fn>
void for_each_op_weight(Weights& w, Fn&& fn) {
  fn(w.token_embedding);
  fn(w.position_embedding);
  for (auto& l : w.layers) for_each_layer_tensor(l, fn);
  fn(w.final_norm_weight);
  fn(w.final_norm_bias);
  fn(w.lm_head);
}

// The layer's matrices in one fixed order: q, k, v, o, gate, up, down (gate absent,
// data == nullptr, in GPT-2's MLP).
inline std::array<Tensor*, 7> layer_matrices(LayerWeights& l) {
  return {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down};
}
inline std::array<const Tensor*, 7> layer_matrices(const LayerWeights& l) {
  return {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down};
}

// Maps the archive's tensors onto ModelWeights, checking every shape against `config`.
// Errors name the tensor and file (see SafetensorsArchive::tensor).
void load_weights(const ModelConfig& config, const SafetensorsArchive& archive, ModelWeights& weights);

// Views of every tensor of `w` (none of its owned storage, which must outlive the result).
ModelWeights view_weights(const ModelWeights& w);

// A pointer to `t`, or nullptr when the optional tensor is absent.
inline const Tensor* optional_tensor(const Tensor& t) { return t.data != nullptr ? &t : nullptr; }

}  // namespace tokenmill
