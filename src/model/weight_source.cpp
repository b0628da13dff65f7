#include "model/weight_source.h"

#include <fmt/format.h>

namespace tokenmill {

const LlamaTensorNames kHuggingFaceLlamaNames = {
    .token_embedding = "model.embed_tokens.weight",
    .final_norm = "model.norm.weight",
    .lm_head = "lm_head.weight",
    .layer_prefix = "model.layers.{}.",
    .attn_norm = "input_layernorm",
    .q = "self_attn.q_proj",
    .k = "self_attn.k_proj",
    .v = "self_attn.v_proj",
    .o = "self_attn.o_proj",
    .mlp_norm = "post_attention_layernorm",
    .gate = "mlp.gate_proj",
    .up = "mlp.up_proj",
    .down = "mlp.down_proj",
};

const LlamaTensorNames kGgufLlamaNames = {
    .token_embedding = "token_embd.weight",
    .final_norm = "output_norm.weight",
    .lm_head = "output.weight",
    .layer_prefix = "blk.{}.",
    .attn_norm = "attn_norm",
    .q = "attn_q",
    .k = "attn_k",
    .v = "attn_v",
    .o = "attn_output",
    .mlp_norm = "ffn_norm",
    .gate = "ffn_gate",
    .up = "ffn_up",
    .down = "ffn_down",
};

void load_llama_family(const ModelConfig& c, const WeightSource& w, const LlamaTensorNames& names,
                       ModelWeights& out) {
  const int64_t d = c.hidden_size, ff = c.intermediate_size;
  const int64_t q_width = c.num_attention_heads * c.head_dim;
  const int64_t kv_width = c.num_key_value_heads * c.head_dim;
  out.token_embedding = w.matrix(names.token_embedding, c.vocab_size, d);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string l = fmt::format(fmt::runtime(names.layer_prefix), i);
    const auto weight = [&](const std::string& name) { return l + name + ".weight"; };
    const auto bias = [&](const std::string& name) { return l + name + ".bias"; };
    LayerWeights& layer = out.layers.emplace_back();
    layer.attn_norm_weight = w.vector_f32(weight(names.attn_norm), d);
    layer.q = w.matrix(weight(names.q), q_width, d);
    layer.k = w.matrix(weight(names.k), kv_width, d);
    layer.v = w.matrix(weight(names.v), kv_width, d);
    layer.o = w.matrix(weight(names.o), d, q_width);
    if (c.attention_qkv_bias) {
      layer.q_bias = w.vector_f32(bias(names.q), q_width);
      layer.k_bias = w.vector_f32(bias(names.k), kv_width);
      layer.v_bias = w.vector_f32(bias(names.v), kv_width);
    }
    if (c.attention_out_bias) layer.o_bias = w.vector_f32(bias(names.o), d);
    layer.mlp_norm_weight = w.vector_f32(weight(names.mlp_norm), d);
    layer.gate = w.matrix(weight(names.gate), ff, d);
    layer.up = w.matrix(weight(names.up), ff, d);
    layer.down = w.matrix(weight(names.down), d, ff);
    if (c.mlp_bias) {
      layer.gate_bias = w.vector_f32(bias(names.gate), ff);
      layer.up_bias = w.vector_f32(bias(names.up), ff);
      layer.down_bias = w.vector_f32(bias(names.down), d);
    }
  }
  out.final_norm_weight = w.vector_f32(names.final_norm, d);
}

}  // namespace tokenmill
