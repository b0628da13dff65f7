// gpt-oss (GptOssForCausalLM, GGUF "gpt-oss"): the Llama layer with biases on q, k, v and o,
// a learned sink logit per attention head (self_attn.sinks), sliding-window layers (128
// positions) alternating with global ones, YaRN RoPE, and for its MLP a mixture of experts
// with biases on the router and the experts, whose SwiGLU is clamped (swiglu_alpha,
// swiglu_limit) and whose weights Hugging Face keeps fused, in MXFP4 in the released
// checkpoints (model/fused_experts.h). The router's weights are the softmax over the chosen
// experts' scores (the renormalised softmax). llama.cpp names the MLP's norm
// post_attention_norm.
#include <nlohmann/json.hpp>

#include "model/arch/families.h"

namespace tokenmill {

namespace {

// kLlamaLayout is constant-initialised (string literals only), so it is ready here.
const TensorLayout kGptOssLayout = [] {
  TensorLayout layout = with_experts(kLlamaLayout, "mlp.router", {}, {}, {});
  layout.mlp_norm = {"post_attention_layernorm", "post_attention_norm"};
  layout.hf_fused_experts = "mlp.experts";
  layout.attn_sinks = {"self_attn.sinks", "attn_sinks"};
  return layout;
}();

// transformers' defaults for the RoPE fields a config may leave out.
nlohmann::json with_default_rope(const nlohmann::json& config) {
  nlohmann::json out = config;
  if (!out.contains("rope_theta") &&
      !(out.contains("rope_parameters") && out["rope_parameters"].contains("rope_theta")))
    out["rope_theta"] = 150000.0;
  if (!out.contains("rope_parameters") && !out.contains("rope_scaling"))
    out["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 32.0},
                           {"beta_fast", 32.0},   {"beta_slow", 1.0},
                           {"truncate", false},   {"original_max_position_embeddings", 4096}};
  return out;
}

void read_gpt_oss_config(const FieldReader& given, ModelConfig& c) {
  const nlohmann::json config = with_default_rope(given.object());
  const FieldReader f(config, given.source());
  read_llama_config(f, c);
  c.attention_sinks = true;
  c.sliding_window = f.integer_or("sliding_window", 128, 0, kMaxPositions);
  c.sliding_layers = read_sliding_layers(f, c.num_hidden_layers, 2);
  c.num_experts = f.integer("num_local_experts", 1, kMaxExperts);
  c.experts_per_token = f.integer("num_experts_per_tok", 1, c.num_experts);
  c.expert_intermediate_size = c.intermediate_size;
  c.normalize_expert_weights = true;
  c.mlp_bias = true;
  c.swiglu_alpha = f.number_or("swiglu_alpha", 1.702, -1e6, 1e6);
  c.swiglu_limit = f.number_or("swiglu_limit", 7.0, 1e-6, 1e6);
  read_router_aux_loss(f, c);
}

}  // namespace

const Architecture kGptOssArchitecture = {"GptOssForCausalLM", "gpt_oss", "gpt-oss", &kGptOssLayout,
                                          read_gpt_oss_config};

}  // namespace tokenmill
