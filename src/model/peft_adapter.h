// A Hugging Face PEFT LoRA adapter read for inference (multi-LoRA serving): the directory
// peft's save_pretrained writes, as `tokenmill export --lora adapter` does too:
//  - adapter_config.json: peft_type "LORA", r and lora_alpha, rank_pattern / alpha_pattern
//    (per-module r and alpha: a key is a regular expression that matches the end of a module's
//    name after a dot, PEFT's rule), use_rslora;
//  - adapter_model.safetensors: "base_model.model.<module>.lora_A.weight" [r, in] and
//    "...lora_B.weight" [out, r] per adapted module (model/lora_modules.h), F32, BF16 or F16.
// Each module's scale, alpha / r (use_rslora: alpha / sqrt(r)), is folded into its B, so the
// result's LoraWeights::scale is 1 and a layer adds (x A^T) B^T. A module fused in the
// checkpoint (GPT-2's c_attn, Phi-3's qkv_proj and gate_up_proj) gives each part it feeds the
// whole A and that part's rows of B. For a model that holds q and k with interleaved rows (a
// GGUF llama file, RopeLayout::Interleaved) their B rows are permuted the same way.
//
// Refused, each with an Error naming the directory and the reason: another PEFT method,
// DoRA, LoRA on biases, modules_to_save (whole replaced modules), a tensor of no adaptable
// module of the model (lm_head, embeddings, experts), an A without its B, a rank other than
// the config's, shapes that do not match the model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "core/device_memory.h"
#include "core/tensor_store.h"
#include "model/lora.h"
#include "model/model_config.h"

namespace tokenmill {

struct LoraAdapter {
  explicit LoraAdapter(DeviceMemory& memory) : store(memory) {}
  TensorStore store;    // owns the tensors `weights` views
  LoraWeights weights;  // scale 1: each module's scale is in its B
  int64_t max_rank = 0;
  std::string base_model;  // base_model_name_or_path as the config gives it ("" if none)
};

// Reads the adapter in `dir` for `config`'s model, its tensors f32 in `memory`.
std::unique_ptr<LoraAdapter> read_peft_adapter(const ModelConfig& config, const std::filesystem::path& dir,
                                               DeviceMemory& memory = host_memory());

}  // namespace tokenmill
