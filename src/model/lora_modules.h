// Where a LoRA adapter's tensors sit in a Hugging Face PEFT adapter: the transformers module
// of each adaptable linear layer, and which engine targets (model/lora.h) its output rows
// feed. A module feeds one target (Llama's self_attn.q_proj), or several when the checkpoint
// fuses them: GPT-2's attn.c_attn and Phi-3's self_attn.qkv_proj ([q | k | v] rows), Phi-3's
// mlp.gate_up_proj ([gate | up] rows). PEFT names an adapted module
// "base_model.model.<name>" in adapter_model.safetensors and lists <target> in target_modules.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/lora.h"
#include "model/model_config.h"

namespace tokenmill {

struct LoraModule {
  struct Part {
    LoraTarget target;
    int64_t rows;  // of the module's output, in order
  };
  // The module's full transformers name ("model.layers.3.self_attn.q_proj"); a model whose
  // layers sit elsewhere in transformers' module tree than its tensors (a multimodal
  // checkpoint's language model, Architecture::exported_as.module_layer) is named there.
  std::string name;
  // Its target_modules entry: the last dotted part ("q_proj", "c_fc"), or the name within the
  // layer where that part is not unique in a layer (GPT-2's "attn.c_proj", "mlp.c_proj") or the
  // model is named by module_layer.
  std::string target;
  std::vector<Part> parts;
};

// The adaptable linear modules of layer `layer` in `config`'s architecture: the attention
// projections, and the MLP's unless the model is a mixture of experts (its experts are not
// adapted).
std::vector<LoraModule> lora_modules(const ModelConfig& config, int64_t layer);

}  // namespace tokenmill
