// Phi-3, Phi-3.5 and Phi-4 (Phi3ForCausalLM): the Llama layer with q|k|v fused into
// qkv_proj and gate|up into gate_up_proj, in both formats (llama.cpp's "phi3" keeps the fused
// gate|up as ffn_up).
#include "model/arch/families.h"

namespace tokenmill {

namespace {

// kLlamaLayout is constant-initialised (string literals only), so it is ready here.
const TensorLayout kPhi3Layout = [] {
  TensorLayout layout = kLlamaLayout;
  layout.q = layout.k = layout.v = layout.gate = layout.up = {};
  layout.qkv = {"self_attn.qkv_proj", "attn_qkv"};
  layout.gate_up = {"mlp.gate_up_proj", "ffn_up"};
  return layout;
}();

// Phi-3-mini-4k's config keeps a sliding window. LongRoPE (the 128k models, Phi-3.5,
// Phi-4-mini) and Phi-4-mini's partial rotary factor are read as for any family.
void read_phi3_config(const FieldReader& f, ModelConfig& c) {
  read_llama_config(f, c);
  c.sliding_window = f.integer_or("sliding_window", 0, 0, kMaxPositions);
}

}  // namespace

const Architecture kPhi3Architecture = {"Phi3ForCausalLM", "phi3", "phi3", &kPhi3Layout, read_phi3_config};

}  // namespace tokenmill
