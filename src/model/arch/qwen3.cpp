// Qwen3 (Qwen3ForCausalLM): the Llama family with an RMSNorm over each head of q and k before
// RoPE (self_attn.q_norm / k_norm, llama.cpp's attn_q_norm / attn_k_norm), no biases.
#include "model/arch/families.h"

namespace tokenmill {

namespace {

void read_qwen3_config(const FieldReader& f, ModelConfig& c) {
  read_llama_config(f, c);
  c.qk_norm = QkNorm::PerHead;
  if (f.boolean_or("use_sliding_window", false))
    fail("{}: use_sliding_window=true is not supported", f.source());
}

}  // namespace

const Architecture kQwen3Architecture = {"Qwen3ForCausalLM", "qwen3", "qwen3", &kLlamaLayout,
                                         read_qwen3_config};

}  // namespace tokenmill
