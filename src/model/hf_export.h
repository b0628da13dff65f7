// Export to a Hugging Face model directory that transformers (and tokenmill) load:
// config.json (the model's config with "torch_dtype" and "dtype" both set to the weights'
// dtype), generation_config.json (its bos / eos ids) and model.safetensors in the Hugging Face layout of the
// architecture:
//  - Llama / Mistral / Qwen2 (and from-scratch models): model.embed_tokens, model.layers.N.
//    {input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm,
//    mlp.{gate,up,down}_proj}, model.norm, lm_head (absent when tied);
//  - GPT-2: Conv1D weights stored [in, out] and q, k, v fused into attn.c_attn.
// Values are converted from the engine's weights (any of f32/bf16/f16) to `dtype` (f32,
// bf16 or f16, round to nearest even). Files are written atomically; the directory is
// created if needed.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "core/dtype.h"
#include "formats/safetensors_writer.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace tokenmill {

// Adds `t` (f32, bf16 or f16; matrix or vector) to `writer` under `name`, converted to
// `dtype` (f32, bf16 or f16) when written. Error if `t` is absent.
void add_converted_tensor(SafetensorsWriter& writer, const std::string& name, const Tensor& t, DType dtype);

// Writes `j` (indented, newline-terminated) to `path` atomically.
void write_json_file(const std::filesystem::path& path, const nlohmann::json& j);

void export_hf_model(const ModelConfig& config, nlohmann::json config_json, const ModelWeights& weights,
                     DType dtype, const std::filesystem::path& dir);

}  // namespace tokenmill
