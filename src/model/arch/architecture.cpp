#include "model/arch/architecture.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "model/arch/families.h"

namespace tokenmill {

namespace {

// Every architecture, Llama before Mistral and Mixtral (all three are "llama" in GGUF files),
// Gemma 3's text model before its multimodal checkpoints' (both "gemma3").
constexpr const Architecture* kArchitectures[] = {
    &kGpt2Architecture,  &kLlamaArchitecture,  &kMistralArchitecture,  &kMixtralArchitecture,
    &kQwen2Architecture, &kQwen3Architecture,  &kQwen3MoeArchitecture, &kPhi3Architecture,
    &kOlmo2Architecture, &kGemma2Architecture, &kGemma3Architecture,   &kGemma3VisionArchitecture,
    &kGptOssArchitecture};

template <class Member>
const Architecture* find_by(Member member, std::string_view value) {
  const auto* const* it = std::find_if(std::begin(kArchitectures), std::end(kArchitectures),
                                       [&](const Architecture* a) { return a->*member == value; });
  return it == std::end(kArchitectures) ? nullptr : *it;
}

}  // namespace

const Architecture* find_architecture(std::string_view hf_class) {
  return find_by(&Architecture::hf_class, hf_class);
}

const Architecture* find_gguf_architecture(std::string_view gguf_arch, bool mixture_of_experts) {
  for (const Architecture* a : kArchitectures)
    if (a->gguf_arch == gguf_arch && a->layout->router.present() == mixture_of_experts) return a;
  return find_by(&Architecture::gguf_arch, gguf_arch);
}

const Architecture& architecture_of(const ModelConfig& config) {
  const Architecture* a = find_by(&Architecture::model_type, config.model_type);
  if (a == nullptr) fail("no architecture has the model type '{}'", config.model_type);
  return *a;
}

const TensorLayout& tensor_layout(const ModelConfig& config) { return *architecture_of(config).layout; }

std::string supported_architectures() {
  std::vector<std::string_view> names;
  for (const Architecture* a : kArchitectures) names.push_back(a->hf_class);
  return fmt::format("{}", fmt::join(names, ", "));
}

std::string supported_gguf_architectures() {
  std::vector<std::string_view> names;
  for (const Architecture* a : kArchitectures)
    if (std::find(names.begin(), names.end(), a->gguf_arch) == names.end()) names.push_back(a->gguf_arch);
  return fmt::format("{}", fmt::join(names, ", "));
}

std::string layer_module_name(const TensorLayout& layout, WeightFormat format, int64_t layer,
                              ModuleName module) {
  return fmt::format(fmt::runtime(layout.layer.in(format)), layer) + std::string(module.in(format));
}

std::string expert_name(std::string_view name, int64_t expert) {
  const size_t at = name.find("{}");
  if (at == std::string_view::npos) fail("'{}' has no {{}} for the expert index", name);
  return fmt::format("{}{}{}", name.substr(0, at), expert, name.substr(at + 2));
}

}  // namespace tokenmill
