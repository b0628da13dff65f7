#include "model/weight_source.h"

#include <cstring>
#include <span>

#include <fmt/format.h>

#include "core/error.h"
#include "model/weight_placement.h"

namespace tokenmill {

namespace {

// The names of one format, with the checkpoint's prefix.
class Names {
 public:
  Names(const TensorLayout& layout, WeightFormat format, std::string prefix)
      : layout_(layout), format_(format), prefix_(std::move(prefix)) {}

  std::string model(ModuleName m, const char* suffix) const {
    return prefix_ + std::string(m.in(format_)) + suffix;
  }
  std::string layer(int64_t i, ModuleName m, const char* suffix) const {
    return prefix_ + layer_module_name(layout_, format_, i, m) + suffix;
  }

 private:
  const TensorLayout& layout_;
  WeightFormat format_;
  std::string prefix_;
};

// Gemma's RMSNorm weights w of a Hugging Face checkpoint become the 1 + w it multiplies by.
void add_one_to_norm_weights(ModelWeights& w) {
  const auto add_one = [](Tensor& t) {
    if (t.data == nullptr) return;
    for (float& x : std::span(t.as<float>(), static_cast<size_t>(t.numel()))) x += 1.0f;
  };
  for (LayerWeights& l : w.layers)
    for (Tensor* t : {&l.attn_norm_weight, &l.q_norm_weight, &l.k_norm_weight, &l.attn_post_norm_weight,
                      &l.mlp_norm_weight, &l.mlp_post_norm_weight})
      add_one(*t);
  add_one(w.final_norm_weight);
}

}  // namespace

ExpertStacks WeightSource::fused_experts(const std::string& module, int64_t, int64_t, int64_t) const {
  fail("experts '{}': this format does not keep experts as one fused module", module);
}

Tensor stack_experts(TensorStore& store, int64_t count, const std::function<Tensor(int64_t)>& expert,
                     const std::function<std::string(int64_t)>& names) {
  Tensor stacked;
  for (int64_t e = 0; e < count; ++e) {
    const Tensor m = expert(e);
    if (e == 0) {
      check_room_for(host_memory(), static_cast<uint64_t>(count) * m.nbytes(),
                     fmt::format("the {} experts of '{}', stacked in memory at load,", count, names(0)));
      stacked = store.allocate(m.dtype, {count * m.rows(), m.cols()});  // < 2^63 by the config's bounds
    }
    if (m.dtype != stacked.dtype)
      fail("tensor '{}' is {} but expert 0's is {}: the experts of a layer must share a dtype", names(e),
           dtype_name(m.dtype), dtype_name(stacked.dtype));
    std::memcpy(expert_matrix(stacked, e, count).data, m.data, m.nbytes());
  }
  return stacked;
}

void load_layout_weights(const ModelConfig& c, const WeightSource& w, WeightFormat format,
                         ModelWeights& out) {
  const TensorLayout& layout = tensor_layout(c);
  const std::string hf_prefix(layout.hf_prefix);
  const bool prefixed =
      format == WeightFormat::HuggingFace && !hf_prefix.empty() &&
      (layout.hf_prefix_required || w.has(hf_prefix + std::string(layout.token_embedding.hf) + ".weight"));
  const Names names(layout, format, prefixed ? hf_prefix : "");
  const int64_t d = c.hidden_size, ff = c.intermediate_size;
  const int64_t q_width = c.num_attention_heads * c.head_dim;
  const int64_t kv_width = c.num_key_value_heads * c.head_dim;
  const bool layer_norm = c.norm == NormKind::LayerNorm;

  out.token_embedding = w.matrix(names.model(layout.token_embedding, ".weight"), c.vocab_size, d);
  if (c.positions == PositionKind::Learned)
    out.position_embedding =
        w.matrix(names.model(layout.position_embedding, ".weight"), c.max_position_embeddings, d);
  out.layers.reserve(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    LayerWeights& l = out.layers.emplace_back();
    const auto norm = [&](ModuleName m, Tensor& weight, Tensor& bias) {
      weight = w.vector_f32(names.layer(i, m, ".weight"), d);
      if (layer_norm) bias = w.vector_f32(names.layer(i, m, ".bias"), d);
    };
    const auto linear = [&](ModuleName m, int64_t rows, int64_t cols, bool has_bias, Tensor& weight,
                            Tensor& bias) {
      weight = w.linear(names.layer(i, m, ".weight"), rows, cols);
      if (has_bias) bias = w.vector_f32(names.layer(i, m, ".bias"), rows);
    };
    norm(layout.attn_norm, l.attn_norm_weight, l.attn_norm_bias);
    if (layout.qkv.present()) {  // rows [q | k | v]
      Tensor qkv, qkv_bias;
      linear(layout.qkv, q_width + 2 * kv_width, d, c.attention_qkv_bias, qkv, qkv_bias);
      l.q = qkv.slice_rows(0, q_width);
      l.k = qkv.slice_rows(q_width, kv_width);
      l.v = qkv.slice_rows(q_width + kv_width, kv_width);
      if (c.attention_qkv_bias) {
        l.q_bias = qkv_bias.slice_rows(0, q_width);
        l.k_bias = qkv_bias.slice_rows(q_width, kv_width);
        l.v_bias = qkv_bias.slice_rows(q_width + kv_width, kv_width);
      }
    } else {
      linear(layout.q, q_width, d, c.attention_qkv_bias, l.q, l.q_bias);
      linear(layout.k, kv_width, d, c.attention_qkv_bias, l.k, l.k_bias);
      linear(layout.v, kv_width, d, c.attention_qkv_bias, l.v, l.v_bias);
    }
    if (c.qk_norm != QkNorm::None) {
      l.q_norm_weight = w.vector_f32(names.layer(i, layout.q_norm, ".weight"), c.q_norm_width());
      l.k_norm_weight = w.vector_f32(names.layer(i, layout.k_norm, ".weight"), c.k_norm_width());
    }
    if (c.attention_sinks) {  // Hugging Face names the parameter itself, GGUF a module's weight
      const bool hf = format == WeightFormat::HuggingFace;
      l.attn_sinks =
          w.vector_f32(names.layer(i, layout.attn_sinks, hf ? "" : ".weight"), c.num_attention_heads);
    }
    linear(layout.o, d, q_width, c.attention_out_bias, l.o, l.o_bias);
    norm(layout.mlp_norm, l.mlp_norm_weight, l.mlp_norm_bias);
    if (c.sandwich_norms) {
      l.attn_post_norm_weight = w.vector_f32(names.layer(i, layout.attn_post_norm, ".weight"), d);
      l.mlp_post_norm_weight = w.vector_f32(names.layer(i, layout.mlp_post_norm, ".weight"), d);
    }
    if (layout.gate_up.present()) {  // rows [gate | up]
      Tensor gate_up, gate_up_bias;
      linear(layout.gate_up, 2 * ff, d, c.mlp_bias, gate_up, gate_up_bias);
      l.gate = gate_up.slice_rows(0, ff);
      l.up = gate_up.slice_rows(ff, ff);
      if (c.mlp_bias) {
        l.gate_bias = gate_up_bias.slice_rows(0, ff);
        l.up_bias = gate_up_bias.slice_rows(ff, ff);
      }
    } else if (!c.mixture_of_experts()) {
      if (gated_mlp(c.mlp)) linear(layout.gate, ff, d, c.mlp_bias, l.gate, l.gate_bias);
      linear(layout.up, ff, d, c.mlp_bias, l.up, l.up_bias);
    }
    if (c.mixture_of_experts()) {
      const int64_t experts = c.num_experts, expert_ff = c.expert_intermediate_size;
      linear(layout.router, experts, d, c.mlp_bias, l.router, l.router_bias);
      if (format == WeightFormat::HuggingFace && !layout.hf_fused_experts.empty()) {
        const ModuleName module{layout.hf_fused_experts, {}};
        ExpertStacks s = w.fused_experts(names.layer(i, module, ""), experts, expert_ff, d);
        l.expert_gate = s.gate;
        l.expert_up = s.up;
        l.expert_down = s.down;
        l.expert_gate_bias = s.gate_bias;
        l.expert_up_bias = s.up_bias;
        l.expert_down_bias = s.down_bias;
      } else {
        const auto stack = [&](ModuleName m, int64_t rows, int64_t cols, Tensor& weight, Tensor& bias) {
          weight = w.experts(names.layer(i, m, ".weight"), experts, rows, cols);
          if (c.mlp_bias) bias = w.expert_biases(names.layer(i, m, ".bias"), experts, rows);
        };
        stack(layout.expert_gate, expert_ff, d, l.expert_gate, l.expert_gate_bias);
        stack(layout.expert_up, expert_ff, d, l.expert_up, l.expert_up_bias);
        stack(layout.expert_down, d, expert_ff, l.expert_down, l.expert_down_bias);
      }
    } else {
      linear(layout.down, d, ff, c.mlp_bias, l.down, l.down_bias);
    }
  }
  out.final_norm_weight = w.vector_f32(names.model(layout.final_norm, ".weight"), d);
  if (layer_norm) out.final_norm_bias = w.vector_f32(names.model(layout.final_norm, ".bias"), d);
  // lm_head carries no prefix in Hugging Face GPT-2 checkpoints.
  out.lm_head = c.tie_word_embeddings
                    ? out.token_embedding
                    : w.matrix(std::string(layout.lm_head.in(format)) + ".weight", c.vocab_size, d);
  if (c.norm_weight_offset && format == WeightFormat::HuggingFace) add_one_to_norm_weights(out);
}

}  // namespace tokenmill
