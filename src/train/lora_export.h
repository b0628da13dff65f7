// A LoRA adapter as a Hugging Face PEFT adapter directory, loadable with
// peft.PeftModel.from_pretrained(base_model, dir):
//  - adapter_config.json: peft_type "LORA", task_type "CAUSAL_LM", r, lora_alpha,
//    target_modules (the Hugging Face module names), lora_dropout 0, bias "none",
//    base_model_name_or_path, ...;
//  - adapter_model.safetensors: "base_model.model.<module>.lora_A.weight" [r, in] and
//    "...lora_B.weight" [out, r] per adapted module, <module> e.g.
//    "model.layers.3.self_attn.q_proj" (Llama family).
// GPT-2 keeps q, k, v in one Conv1D module (attn.c_attn): its q/k/v adapters are written as
// one c_attn adapter of rank m r (m of q, k, v adapted): A = [A_q; A_k; A_v] stacked, B
// block-diagonal ([3 hidden, m r]), with rank_pattern / alpha_pattern {"c_attn": m r / m alpha}
// so that its scale alpha / r stays the same; the result is exactly the sum of the parts.
// fan_in_fan_out is true for GPT-2 (Conv1D), as PEFT sets it. A multimodal checkpoint's
// language model (Gemma 3 4B+) names its modules where transformers' module tree keeps them
// ("model.language_model.layers.3.self_attn.q_proj"), and target_modules is then a regular
// expression over those names, so that PEFT adapts the language model only, not the vision
// tower's modules of the same names.
#pragma once

#include <filesystem>
#include <string>

#include "core/dtype.h"
#include "model/lora.h"
#include "model/model_config.h"

namespace tokenmill {

void export_peft_adapter(const ModelConfig& config, const LoraConfig& lora, const LoraWeights& adapter,
                         const std::string& base_model, DType dtype, const std::filesystem::path& dir);

}  // namespace tokenmill
