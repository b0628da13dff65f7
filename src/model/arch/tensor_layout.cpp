#include "model/arch/tensor_layout.h"

#include <fmt/format.h>

#include "core/error.h"
#include "model/arch/families.h"

namespace tokenmill {

const TensorLayout& tensor_layout(const ModelConfig& config) {
  if (config.model_type == "gpt2") return kGpt2Layout;
  if (config.model_type == "phi3") return kPhi3Layout;
  if (config.model_type == "olmo2") return kOlmo2Layout;
  if (config.model_type == "llama" || config.model_type == "mistral" || config.model_type == "qwen2" ||
      config.model_type == "qwen3")
    return kLlamaLayout;
  fail("no tensor layout for model type '{}'", config.model_type);
}

std::string layer_module_name(const TensorLayout& layout, WeightFormat format, int64_t layer,
                              ModuleName module) {
  return fmt::format(fmt::runtime(layout.layer.in(format)), layer) + std::string(module.in(format));
}

}  // namespace tokenmill
