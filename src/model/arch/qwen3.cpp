// Qwen3 (Qwen3ForCausalLM): the Llama family with an RMSNorm over each head of q and k before
// RoPE (self_attn.q_norm / k_norm, llama.cpp's attn_q_norm / attn_k_norm), no biases.
// Qwen3-MoE (Qwen3MoeForCausalLM, GGUF "qwen3moe"): the same attention, and every layer's MLP
// a mixture of SwiGLU experts (mlp.gate the router, mlp.experts.N.{gate,up,down}_proj).
#include "model/arch/families.h"

namespace tokenmill {

namespace {

void read_qwen3_config(const FieldReader& f, ModelConfig& c) {
  read_llama_config(f, c);
  c.qk_norm = QkNorm::PerHead;
  if (f.boolean_or("use_sliding_window", false))
    fail("{}: use_sliding_window=true is not supported", f.source());
}

// kLlamaLayout is constant-initialised (string literals only), so it is ready here.
const TensorLayout kQwen3MoeLayout = with_experts(kLlamaLayout, "mlp.gate", "mlp.experts.{}.gate_proj",
                                                  "mlp.experts.{}.up_proj", "mlp.experts.{}.down_proj");

// Every layer sparse (decoder_sparse_step 1, no mlp_only_layers), as in the released models.
// transformers 5 writes the expert count as num_local_experts, the Hub's files num_experts.
void read_qwen3_moe_config(const FieldReader& f, ModelConfig& c) {
  read_qwen3_config(f, c);
  const char* count = f.has("num_experts") ? "num_experts" : "num_local_experts";
  c.num_experts = f.integer(count, 1, kMaxExperts);
  c.experts_per_token = f.integer("num_experts_per_tok", 1, c.num_experts);
  c.expert_intermediate_size = f.integer("moe_intermediate_size", 1, kMaxDimension);
  c.normalize_expert_weights = f.boolean_or("norm_topk_prob", false);
  read_router_aux_loss(f, c);
  if (f.integer_or("decoder_sparse_step", 1, 0, kMaxLayers) != 1)
    fail("{}: decoder_sparse_step other than 1 (dense layers among the sparse ones) is not supported",
         f.source());
  if (f.has("mlp_only_layers") && !f.raw("mlp_only_layers").empty())
    fail("{}: mlp_only_layers (dense layers among the sparse ones) is not supported", f.source());
}

}  // namespace

const Architecture kQwen3MoeArchitecture = {"Qwen3MoeForCausalLM", "qwen3_moe", "qwen3moe", &kQwen3MoeLayout,
                                            read_qwen3_moe_config};

const Architecture kQwen3Architecture = {"Qwen3ForCausalLM", "qwen3", "qwen3", &kLlamaLayout,
                                         read_qwen3_config};

}  // namespace tokenmill
