#include "serve/lora_adapters.h"

#include <algorithm>

#include "backend/backend.h"
#include "core/error.h"

namespace tokenmill {

namespace {

constexpr size_t kMaxNameLength = 128;

bool name_character(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-' || c == ':' || c == '/';
}

}  // namespace

LoraAdapterSpec parse_lora_adapter_spec(std::string_view spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == spec.size())
    fail("--lora '{}': expected NAME=DIR (the name requests give as their model, a PEFT adapter directory)",
         spec);
  const std::string_view name = spec.substr(0, eq);
  if (name.size() > kMaxNameLength || !std::all_of(name.begin(), name.end(), name_character))
    fail("--lora '{}': the name '{}' must be 1 to {} letters, digits or . _ - : /", spec, name,
         kMaxNameLength);
  return {std::string(name), std::filesystem::path(spec.substr(eq + 1))};
}

std::vector<std::unique_ptr<LoraAdapter>> load_lora_adapters(const ModelConfig& config,
                                                             std::span<const LoraAdapterSpec> specs,
                                                             const std::string& served_name,
                                                             DeviceMemory& memory) {
  std::vector<std::unique_ptr<LoraAdapter>> adapters;
  for (size_t i = 0; i < specs.size(); ++i) {
    const LoraAdapterSpec& spec = specs[i];
    if (spec.name == served_name)
      fail("--lora {}: the name is the served model's own; give the adapter another", spec.name);
    for (size_t j = 0; j < i; ++j)
      if (specs[j].name == spec.name) fail("--lora {}: the name is given twice", spec.name);
    std::unique_ptr<LoraAdapter> adapter = read_peft_adapter(config, spec.dir, memory);
    if (adapter->max_rank > Backend::kMaxLoraRank)
      fail("--lora {}: rank {} exceeds the largest served, {}", spec.name, adapter->max_rank,
           Backend::kMaxLoraRank);
    adapters.push_back(std::move(adapter));
  }
  return adapters;
}

}  // namespace tokenmill
