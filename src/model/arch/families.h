// The tensor layouts of the families tokenmill runs, one file each (model/arch/<family>.cpp);
// model/arch/tensor_layout.cpp picks one by model type.
#pragma once

#include "model/arch/tensor_layout.h"

namespace tokenmill {

// Llama, Mistral, Qwen2, Qwen3 (and SmolLM): RMSNorm, SwiGLU, GQA, biases and Qwen3's
// q/k norms per the config.
extern const TensorLayout kLlamaLayout;
// OLMo 2: the Llama names with post-attention and post-feed-forward norms.
extern const TensorLayout kOlmo2Layout;
// Phi-3 / Phi-4: the Llama layer with fused qkv and gate_up projections.
extern const TensorLayout kPhi3Layout;
// GPT-2: LayerNorm, learned positions, GELU MLP, fused Conv1D c_attn, biases everywhere.
extern const TensorLayout kGpt2Layout;

}  // namespace tokenmill
