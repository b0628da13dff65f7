// Phi-3, Phi-3.5 and Phi-4 (Phi3ForCausalLM): the Llama layer with q|k|v fused into
// qkv_proj and gate|up into gate_up_proj, in both formats (llama.cpp's "phi3" keeps the fused
// gate|up as ffn_up).
#include "model/arch/families.h"

namespace tokenmill {

const TensorLayout kPhi3Layout = {
    .token_embedding = {"model.embed_tokens", "token_embd"},
    .final_norm = {"model.norm", "output_norm"},
    .lm_head = {"lm_head", "output"},
    .layer = {"model.layers.{}.", "blk.{}."},
    .attn_norm = {"input_layernorm", "attn_norm"},
    .o = {"self_attn.o_proj", "attn_output"},
    .mlp_norm = {"post_attention_layernorm", "ffn_norm"},
    .gate_up = {"mlp.gate_up_proj", "ffn_up"},
    .down = {"mlp.down_proj", "ffn_down"},
    .qkv = {"self_attn.qkv_proj", "attn_qkv"},
};

}  // namespace tokenmill
