// `tokenmill serve --lora NAME=DIR`: LoRA adapters served beside the model. A request whose
// `model` is NAME runs with the adapter (Engine: every adapter and the base model batched in
// one step; model/peft_adapter.h reads DIR).
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/device_memory.h"
#include "model/model_config.h"
#include "model/peft_adapter.h"

namespace tokenmill {

struct LoraAdapterSpec {
  std::string name;
  std::filesystem::path dir;
};

// Parses NAME=DIR. NAME: 1 to 128 characters of letters, digits and . _ - : / (what a client
// sends as `model`). Throws Error naming what is expected otherwise.
LoraAdapterSpec parse_lora_adapter_spec(std::string_view spec);

// Reads each adapter for `config`, its tensors in `memory`. Throws Error (naming the flag) when
// a name repeats or is the served model's name `served_name`, or an adapter's rank exceeds what
// the backends take (Backend::kMaxLoraRank), or read_peft_adapter refuses it.
std::vector<std::unique_ptr<LoraAdapter>> load_lora_adapters(const ModelConfig& config,
                                                             std::span<const LoraAdapterSpec> specs,
                                                             const std::string& served_name,
                                                             DeviceMemory& memory);

}  // namespace tokenmill
