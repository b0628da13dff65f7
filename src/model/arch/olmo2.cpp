// OLMo 2 (Olmo2ForCausalLM): the Llama family's fields and names, with the norms after attention and
// MLP (post_attention_layernorm, post_feedforward_layernorm) in place of the norms before
// them, and q/k norms over the whole projections.
#include "model/arch/families.h"

namespace tokenmill {

// kLlamaLayout is constant-initialised (string literals only), so it is ready here.
const TensorLayout kOlmo2Layout = [] {
  TensorLayout layout = kLlamaLayout;
  layout.attn_norm = {"post_attention_layernorm", "post_attention_norm"};
  layout.mlp_norm = {"post_feedforward_layernorm", "post_ffw_norm"};
  return layout;
}();

namespace {

void read_olmo2_config(const FieldReader& f, ModelConfig& c) {
  read_llama_config(f, c);
  c.qk_norm = QkNorm::Whole;
  c.post_norms = true;
}

}  // namespace

const Architecture kOlmo2Architecture = {"Olmo2ForCausalLM", "olmo2", "olmo2", &kOlmo2Layout,
                                         read_olmo2_config};

}  // namespace tokenmill
