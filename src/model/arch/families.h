// The architectures tokenmill runs, one family per file (model/arch/<family>.cpp);
// architecture.cpp lists them.
#pragma once

#include "model/arch/architecture.h"

namespace tokenmill {

// Llama, Mistral, Qwen2 (and SmolLM): RMSNorm, SwiGLU, GQA, RoPE, biases per the config.
extern const TensorLayout kLlamaLayout;
extern const Architecture kLlamaArchitecture, kMistralArchitecture, kQwen2Architecture;
// vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads and
// num_key_value_heads (default: one per head), as Llama-like configs name them.
void read_layer_sizes(const FieldReader& fields, ModelConfig& config);
// The config.json fields of the Llama family, which the families built on it read first.
void read_llama_config(const FieldReader& fields, ModelConfig& config);
// `layout` with a mixture of experts for its MLP: the router and each expert's gate, up and
// down projections under these Hugging Face names ({} the expert's index), and llama.cpp's
// names for them (ffn_gate_inp, ffn_{gate,up,down}_exps).
TensorLayout with_experts(TensorLayout layout, std::string_view router, std::string_view gate,
                          std::string_view up, std::string_view down);
// Which layers slide (ModelConfig::sliding_layers): layer_types when given (transformers >= 4.53
// writes it), else every layer but each sliding_window_pattern-th (`pattern` when absent).
std::vector<bool> read_sliding_layers(const FieldReader& fields, int64_t layers, int64_t pattern);
// A mixture of experts' load-balancing loss in training: router_aux_loss_coef (transformers'
// default 0.001) when output_router_logits is true, else none.
void read_router_aux_loss(const FieldReader& fields, ModelConfig& config);
// Qwen3: the Llama family with RMSNorm over each head of q and k; Qwen3-MoE: with a mixture
// of experts for its MLP.
extern const Architecture kQwen3Architecture, kQwen3MoeArchitecture;
// Mixtral: the Mistral layer with a mixture of experts for its MLP.
extern const Architecture kMixtralArchitecture;
// OLMo 2: norms after attention and MLP, q/k norms over the whole projections.
extern const Architecture kOlmo2Architecture;
// Phi-3 / Phi-4: the Llama layer with fused qkv and gate_up projections.
extern const Architecture kPhi3Architecture;
// Gemma 2 and Gemma 3 (text): GeGLU, norms before and after each block, RMSNorm by
// (1 + weight), scaled embeddings, sliding-window layers among global ones; Gemma 2 soft-caps
// scores and logits, Gemma 3 norms q and k per head.
extern const Architecture kGemma2Architecture, kGemma3Architecture;
// Gemma 3 4B+ (Gemma3ForConditionalGeneration): its language model, exported as Gemma 3 text.
extern const Architecture kGemma3VisionArchitecture;
// gpt-oss: a mixture of clamped-SwiGLU experts with biases (MXFP4 in its checkpoints),
// attention sinks, sliding-window layers alternating with global ones, YaRN.
extern const Architecture kGptOssArchitecture;
// GPT-2: LayerNorm, learned positions, GELU MLP, fused Conv1D c_attn, biases everywhere.
extern const Architecture kGpt2Architecture;

}  // namespace tokenmill
