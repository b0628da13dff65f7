// GGUF models: llama.cpp's model files read into the engine's ModelConfig and
// ModelWeights, so the one transformer forward runs them unchanged.
//
// Architectures (general.architecture): "llama" (Llama 1-3, Mistral, SmolLM), "qwen2",
// "gpt2". The hyper-parameters come from the `{arch}.*` keys, translated into the fields
// of a Hugging Face config.json and validated by the same parser (so a GGUF model and
// the safetensors model it was converted from get the same ModelConfig, except:
//  - llama: convert_hf_to_gguf.py permutes the rows of attn_q/attn_k so that adjacent
//    pairs rotate together; the config says RopeLayout::Interleaved for it. qwen2 keeps
//    Hugging Face's rotate_half layout (Neox).
//  - rope_freqs.weight (llama 3's precomputed rope scaling) divides the inverse
//    frequencies, as llama.cpp does; it is read into ModelWeights::rope_freq_factors.
// Weight matrices stay in the mapped file in their stored type (f32, f16, bf16 or one of
// the quantized formats: zero copies); 1-D tensors (norms, biases) are converted to f32.
#pragma once

#include "formats/gguf.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace tokenmill {

// The model's hyper-parameters and generation ids (tokenizer.ggml.bos/eos_token_id).
// Errors name the file and the missing or invalid key.
ModelConfig gguf_model_config(const GgufFile& gguf);

// Maps the file's tensors onto `weights`, checking every name, shape and type.
void load_gguf_weights(const ModelConfig& config, const GgufFile& gguf, ModelWeights& weights);

}  // namespace tokenmill
