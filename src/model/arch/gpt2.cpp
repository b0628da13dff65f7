// GPT-2: the Hugging Face (GPT2LMHeadModel, Conv1D weights) and llama.cpp tensor names.
#include "model/arch/families.h"

namespace tokenmill {

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

}  // namespace tokenmill
