// An architecture tokenmill runs: the Hugging Face class that names it in config.json, its
// model type, llama.cpp's GGUF architecture name, how its config.json fields become a
// ModelConfig, and where its tensors are (TensorLayout). Each family's file
// (model/arch/<family>.cpp) defines its architectures; architecture.cpp lists them.
#pragma once

#include <string>
#include <string_view>

#include "model/arch/tensor_layout.h"
#include "model/config_fields.h"
#include "model/model_config.h"

namespace tokenmill {

struct Architecture {
  std::string_view hf_class;    // "Qwen3ForCausalLM"
  std::string_view model_type;  // "qwen3"
  std::string_view gguf_arch;   // general.architecture of its GGUF files ("llama" for Mistral)
  const TensorLayout* layout;
  // Reads the family's config.json fields into `config` (whose architecture and model_type
  // are set); the checks every family shares follow in parse_model_config.
  void (*read_config)(const FieldReader& fields, ModelConfig& config);
  // A checkpoint that holds a language model beside other parts (a vision tower): the
  // architecture `tokenmill export` writes it as, and that architecture's config.json made
  // from this one's. Empty: exported as itself.
  // module_layer: where transformers' module tree keeps layer {} (what a PEFT adapter names
  // its modules by), for a checkpoint whose tensors are stored under other names.
  struct Export {
    const Architecture* text_model = nullptr;
    nlohmann::json (*config_json)(const nlohmann::json& config_json) = nullptr;
    std::string_view module_layer{};
  } exported_as{};
};

// The architecture of a config.json "architectures" class; nullptr when unsupported.
const Architecture* find_architecture(std::string_view hf_class);
// The architecture of a GGUF general.architecture, with a mixture of experts (the file has
// {arch}.expert_count) or not: the first listed that agrees (Llama or Mixtral for "llama"),
// else the first of that name; nullptr when unsupported.
const Architecture* find_gguf_architecture(std::string_view gguf_arch, bool mixture_of_experts);
// The architecture a parsed config belongs to.
const Architecture& architecture_of(const ModelConfig& config);
// "GPT2LMHeadModel, LlamaForCausalLM, ..." and "gpt2, llama, ...", for error messages.
std::string supported_architectures();
std::string supported_gguf_architectures();

}  // namespace tokenmill
