// GPT-2 (GPT2LMHeadModel): config.json fields, the Hugging Face (Conv1D weights) and llama.cpp
// tensor names.
#include "model/arch/families.h"

namespace tokenmill {

namespace {

const TensorLayout kGpt2Layout = {
    .hf_prefix = "transformer.",
    .token_embedding = {"wte", "token_embd"},
    .position_embedding = {"wpe", "position_embd"},
    .final_norm = {"ln_f", "output_norm"},
    .lm_head = {"lm_head", "output"},
    .layer = {"h.{}.", "blk.{}."},
    .attn_norm = {"ln_1", "attn_norm"},
    .o = {"attn.c_proj", "attn_output"},
    .mlp_norm = {"ln_2", "ffn_norm"},
    .up = {"mlp.c_fc", "ffn_up"},
    .down = {"mlp.c_proj", "ffn_down"},
    .qkv = {"attn.c_attn", "attn_qkv"},
    .hf_transposed_linears = true,
};

void read_gpt2_config(const FieldReader& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size", 1, kMaxVocab);
  c.hidden_size = f.integer("n_embd", 1, kMaxDimension);
  c.num_hidden_layers = f.integer("n_layer", 1, kMaxLayers);
  c.num_attention_heads = f.integer("n_head", 1, kMaxDimension);
  c.num_key_value_heads = c.num_attention_heads;
  c.intermediate_size = f.integer_or("n_inner", 4 * c.hidden_size, 1, kMaxDimension);
  c.max_position_embeddings = f.integer("n_positions", 1, kMaxPositions);
  c.norm = NormKind::LayerNorm;
  c.norm_eps = f.number_or("layer_norm_epsilon", 1e-5, 0.0, 1.0);
  c.mlp = parse_activation(f.string_or("activation_function", "gelu_new"), f.source());
  if (c.mlp == MlpKind::SwiGlu) fail("{}: GPT-2 with a gated activation is not supported", f.source());
  c.positions = PositionKind::Learned;
  c.attention_qkv_bias = c.attention_out_bias = c.mlp_bias = true;
  c.tie_word_embeddings = f.boolean_or("tie_word_embeddings", true);
  if (f.boolean_or("scale_attn_by_inverse_layer_idx", false) ||
      f.boolean_or("reorder_and_upcast_attn", false))
    fail("{}: scale_attn_by_inverse_layer_idx / reorder_and_upcast_attn are not supported", f.source());
  if (!f.boolean_or("scale_attn_weights", true))
    fail("{}: scale_attn_weights=false is not supported", f.source());
}

}  // namespace

const Architecture kGpt2Architecture = {"GPT2LMHeadModel", "gpt2", "gpt2", &kGpt2Layout, read_gpt2_config};

}  // namespace tokenmill
