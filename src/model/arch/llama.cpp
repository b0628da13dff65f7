// Llama, Mistral, Qwen2, Qwen3 (and SmolLM): the Hugging Face and llama.cpp tensor names.
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

}  // namespace tokenmill
