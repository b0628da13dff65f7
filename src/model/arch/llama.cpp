// Llama, Mistral and Qwen2 (and SmolLM): config.json fields, Hugging Face and llama.cpp
// tensor names. Qwen3, OLMo 2 and Phi-3 build on them (their own files).
#include "model/arch/families.h"

namespace tokenmill {

const TensorLayout kLlamaLayout = {
    .token_embedding = {"model.embed_tokens", "token_embd"},
    .final_norm = {"model.norm", "output_norm"},
    .lm_head = {"lm_head", "output"},
    .layer = {"model.layers.{}.", "blk.{}."},
    .attn_norm = {"input_layernorm", "attn_norm"},
    .o = {"self_attn.o_proj", "attn_output"},
    .mlp_norm = {"post_attention_layernorm", "ffn_norm"},
    .gate = {"mlp.gate_proj", "ffn_gate"},
    .up = {"mlp.up_proj", "ffn_up"},
    .down = {"mlp.down_proj", "ffn_down"},
    .q = {"self_attn.q_proj", "attn_q"},
    .k = {"self_attn.k_proj", "attn_k"},
    .v = {"self_attn.v_proj", "attn_v"},
    .q_norm = {"self_attn.q_norm", "attn_q_norm"},
    .k_norm = {"self_attn.k_norm", "attn_k_norm"},
};

TensorLayout with_experts(TensorLayout layout, std::string_view router, std::string_view gate,
                          std::string_view up, std::string_view down) {
  layout.gate = layout.up = layout.down = {};
  layout.router = {router, "ffn_gate_inp"};
  layout.expert_gate = {gate, "ffn_gate_exps"};
  layout.expert_up = {up, "ffn_up_exps"};
  layout.expert_down = {down, "ffn_down_exps"};
  return layout;
}

void read_layer_sizes(const FieldReader& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size", 1, kMaxVocab);
  c.hidden_size = f.integer("hidden_size", 1, kMaxDimension);
  c.intermediate_size = f.integer("intermediate_size", 1, kMaxDimension);
  c.num_hidden_layers = f.integer("num_hidden_layers", 1, kMaxLayers);
  c.num_attention_heads = f.integer("num_attention_heads", 1, kMaxDimension);
  c.num_key_value_heads = f.integer_or("num_key_value_heads", c.num_attention_heads, 1, kMaxDimension);
}

void read_router_aux_loss(const FieldReader& f, ModelConfig& c) {
  if (f.boolean_or("output_router_logits", false))
    c.router_aux_loss_coef = f.number_or("router_aux_loss_coef", 0.001, 0.0, 1e6);
}

void read_llama_config(const FieldReader& f, ModelConfig& c) {
  read_layer_sizes(f, c);
  if (f.has("head_dim")) c.head_dim = f.integer("head_dim", 1, kMaxDimension);
  c.max_position_embeddings = f.integer("max_position_embeddings", 1, kMaxPositions);
  c.norm = NormKind::RmsNorm;
  c.norm_eps = f.number_or("rms_norm_eps", 1e-6, 0.0, 1.0);
  c.mlp = parse_activation(f.string_or("hidden_act", "silu"), f.source());
  if (c.mlp != MlpKind::SwiGlu) fail("{}: hidden_act must be silu for {}", f.source(), c.architecture);
  c.positions = PositionKind::Rotary;
  parse_rope(f, c);
  c.attention_qkv_bias = c.attention_out_bias = f.boolean_or("attention_bias", false);
  c.mlp_bias = f.boolean_or("mlp_bias", false);
  c.tie_word_embeddings = f.boolean_or("tie_word_embeddings", false);
}

namespace {

// Mistral: tokens attend to the last sliding_window positions.
void read_mistral_config(const FieldReader& f, ModelConfig& c) {
  read_llama_config(f, c);
  c.sliding_window = f.integer_or("sliding_window", 0, 0, kMaxPositions);
}

// Qwen2: q/k/v biases always, no o bias; its optional sliding window is not run.
void read_qwen2_config(const FieldReader& f, ModelConfig& c) {
  read_llama_config(f, c);
  c.attention_qkv_bias = true;
  c.attention_out_bias = false;
  if (f.boolean_or("use_sliding_window", false))
    fail("{}: use_sliding_window=true is not supported", f.source());
}

}  // namespace

const Architecture kLlamaArchitecture = {"LlamaForCausalLM", "llama", "llama", &kLlamaLayout,
                                         read_llama_config};
const Architecture kMistralArchitecture = {"MistralForCausalLM", "mistral", "llama", &kLlamaLayout,
                                           read_mistral_config};
const Architecture kQwen2Architecture = {"Qwen2ForCausalLM", "qwen2", "qwen2", &kLlamaLayout,
                                         read_qwen2_config};

}  // namespace tokenmill
