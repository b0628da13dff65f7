#include "model/lora_modules.h"

#include <fmt/format.h>

#include "model/arch/architecture.h"

namespace tokenmill {

namespace {

// A module's full name in layer `l` and its target_modules entry (see the header).
std::pair<std::string, std::string> module_names(const TensorLayout& layout, std::string_view module_layer,
                                                 int64_t l, ModuleName module) {
  if (!module_layer.empty())
    return {fmt::format(fmt::runtime(module_layer), l) + std::string(module.hf), std::string(module.hf)};
  const auto last_part = [](std::string_view name) { return name.substr(name.rfind('.') + 1); };
  const std::string_view last = last_part(module.hf);
  int sharing = 0;
  for (const TensorLayout::LayerModule& m : layout.layer_modules())
    if (m.name.present() && last_part(m.name.hf) == last) ++sharing;
  return {std::string(layout.hf_prefix) + layer_module_name(layout, WeightFormat::HuggingFace, l, module),
          std::string(sharing > 1 ? module.hf : last)};
}

}  // namespace

std::vector<LoraModule> lora_modules(const ModelConfig& config, int64_t layer) {
  const TensorLayout& layout = tensor_layout(config);
  const std::string_view module_layer = architecture_of(config).exported_as.module_layer;
  const auto rows = [&](LoraTarget t) { return LoraModule::Part{t, lora_target_shape(config, t)[0]}; };
  std::vector<LoraModule> modules;
  const auto add = [&](ModuleName module, std::vector<LoraModule::Part> parts) {
    if (!module.present()) return;
    auto [name, target] = module_names(layout, module_layer, layer, module);
    modules.push_back({std::move(name), std::move(target), std::move(parts)});
  };
  add(layout.q, {rows(LoraTarget::Q)});
  add(layout.k, {rows(LoraTarget::K)});
  add(layout.v, {rows(LoraTarget::V)});
  add(layout.qkv, {rows(LoraTarget::Q), rows(LoraTarget::K), rows(LoraTarget::V)});
  add(layout.o, {rows(LoraTarget::O)});
  if (config.mixture_of_experts()) return modules;
  add(layout.gate, {rows(LoraTarget::Gate)});
  add(layout.up, {rows(LoraTarget::Up)});
  add(layout.gate_up, {rows(LoraTarget::Gate), rows(LoraTarget::Up)});
  add(layout.down, {rows(LoraTarget::Down)});
  return modules;
}

}  // namespace tokenmill
