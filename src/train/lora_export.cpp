#include "train/lora_export.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <deque>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "formats/safetensors_writer.h"
#include "model/arch/architecture.h"
#include "model/hf_export.h"
#include "model/lora_modules.h"

namespace tokenmill {

namespace {

// One adapted Hugging Face module: its full name, its target_modules entry and its tensors.
struct Module {
  std::string name, target;
  Tensor a, b;
};

// The module of layer `l` that feeds exactly `parts` (one target, or GPT-2's fused c_attn).
const LoraModule& module_feeding(const std::vector<LoraModule>& modules, std::vector<LoraTarget> parts) {
  for (const LoraModule& m : modules) {
    std::vector<LoraTarget> fed;
    for (const LoraModule::Part& p : m.parts) fed.push_back(p.target);
    if (fed == parts) return m;
  }
  fail("export: the model has no module adapting {}", lora_target_name(parts.front()));
}

std::vector<Module> llama_modules(const ModelConfig& config, const LoraConfig& lora,
                                  const LoraWeights& adapter) {
  std::vector<Module> modules;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    const std::vector<LoraModule> in_layer = lora_modules(config, l);
    for (const LoraTarget t : lora.targets) {
      const LoraLinear& ad = adapter.at(l, t);
      const LoraModule& m = module_feeding(in_layer, {t});
      modules.push_back({m.name, m.target, ad.a, ad.b});
    }
  }
  return modules;
}

// target_modules for `targets` (names within a layer): the list itself, or with module_layer
// a regular expression that PEFT matches against whole module names, so that only the
// language model's layers are adapted (a vision tower has modules of the same names).
nlohmann::json target_modules(const std::vector<std::string>& targets, std::string_view module_layer) {
  if (module_layer.empty()) return targets;
  const auto escaped = [](std::string_view s) {
    std::string out;
    for (const char c : s) {
      if (c == '.') out.push_back('\\');
      out.push_back(c);
    }
    return out;
  };
  std::vector<std::string> alternatives;
  for (const std::string& t : targets) alternatives.push_back(escaped(t));
  const size_t at = module_layer.find("{}");
  if (at == std::string_view::npos) fail("'{}' has no {{}} for the layer index", module_layer);
  return fmt::format("{}\\d+{}({})", escaped(module_layer.substr(0, at)),
                     escaped(module_layer.substr(at + 2)), fmt::join(alternatives, "|"));
}

// GPT-2: o, up, down as they are; q, k, v fused into c_attn (see the header). `fused` owns
// the fused tensors.
std::vector<Module> gpt2_modules(const ModelConfig& config, const LoraConfig& lora,
                                 const LoraWeights& adapter, std::deque<std::vector<float>>& fused,
                                 int64_t& fused_parts) {
  std::vector<LoraTarget> qkv;
  for (const LoraTarget t : {LoraTarget::Q, LoraTarget::K, LoraTarget::V})
    if (lora.targets_layer(t)) qkv.push_back(t);
  fused_parts = static_cast<int64_t>(qkv.size());
  const int64_t r = lora.rank, hidden = config.hidden_size, m = fused_parts;
  std::vector<Module> modules;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    const std::vector<LoraModule> in_layer = lora_modules(config, l);
    if (m > 0) {
      std::vector<float>& a = fused.emplace_back(static_cast<size_t>(m * r * hidden), 0.0f);
      std::vector<float>& b = fused.emplace_back(static_cast<size_t>(3 * hidden * m * r), 0.0f);
      for (int64_t j = 0; j < m; ++j) {
        const LoraLinear& ad = adapter.at(l, qkv[static_cast<size_t>(j)]);
        const int64_t part = static_cast<int64_t>(qkv[static_cast<size_t>(j)]);  // q 0, k 1, v 2
        std::copy_n(ad.a.as<const float>(), r * hidden, a.data() + j * r * hidden);
        for (int64_t row = 0; row < hidden; ++row)
          std::copy_n(ad.b.as<const float>() + row * r, r, b.data() + (part * hidden + row) * m * r + j * r);
      }
      const LoraModule& c_attn = module_feeding(in_layer, {LoraTarget::Q, LoraTarget::K, LoraTarget::V});
      modules.push_back({c_attn.name, c_attn.target, Tensor(a.data(), DType::F32, {m * r, hidden}),
                         Tensor(b.data(), DType::F32, {3 * hidden, m * r})});
    }
    for (const LoraTarget t : {LoraTarget::O, LoraTarget::Up, LoraTarget::Down}) {
      if (!lora.targets_layer(t)) continue;
      const LoraLinear& ad = adapter.at(l, t);
      const LoraModule& adapted = module_feeding(in_layer, {t});
      modules.push_back({adapted.name, adapted.target, ad.a, ad.b});
    }
  }
  return modules;
}

}  // namespace

void export_peft_adapter(const ModelConfig& config, const LoraConfig& lora, const LoraWeights& adapter,
                         const std::string& base_model, DType dtype, const std::filesystem::path& dir) {
  const bool gpt2 = config.model_type == "gpt2";
  const TensorLayout& layout = tensor_layout(config);
  if (!gpt2 && (layout.qkv.present() || layout.gate_up.present()))
    fail(
        "export: a PEFT adapter for {} (fused {} / {} projections) cannot be written yet; export the run "
        "with "
        "--lora merged",
        config.architecture, layout.qkv.hf, layout.gate_up.hf);
  std::deque<std::vector<float>> fused;
  int64_t fused_parts = 0;
  const std::vector<Module> modules =
      gpt2 ? gpt2_modules(config, lora, adapter, fused, fused_parts) : llama_modules(config, lora, adapter);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("{}: cannot create the adapter directory ({})", dir.string(), ec.message());
  SafetensorsWriter writer;
  writer.set_metadata({{"format", "pt"}});
  std::vector<std::string> targets;
  for (const Module& m : modules) {
    add_converted_tensor(writer, "base_model.model." + m.name + ".lora_A.weight", m.a, dtype);
    add_converted_tensor(writer, "base_model.model." + m.name + ".lora_B.weight", m.b, dtype);
    if (std::find(targets.begin(), targets.end(), m.target) == targets.end()) targets.push_back(m.target);
  }
  writer.write(dir / "adapter_model.safetensors");
  nlohmann::json rank_pattern = nlohmann::json::object(), alpha_pattern = nlohmann::json::object();
  if (fused_parts > 1) {
    rank_pattern["c_attn"] = fused_parts * lora.rank;
    alpha_pattern["c_attn"] = static_cast<double>(fused_parts) * lora.alpha;
  }
  const nlohmann::json config_json = {
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"base_model_name_or_path", base_model},
      {"r", lora.rank},
      {"lora_alpha", lora.alpha},
      {"target_modules", target_modules(targets, architecture_of(config).exported_as.module_layer)},
      {"lora_dropout", 0.0},
      {"bias", "none"},
      {"fan_in_fan_out", gpt2},
      {"rank_pattern", rank_pattern},
      {"alpha_pattern", alpha_pattern},
      {"init_lora_weights", true},
      {"use_rslora", false},
      {"use_dora", false},
      {"modules_to_save", nullptr},
      {"layers_to_transform", nullptr},
      {"layers_pattern", nullptr},
      {"inference_mode", true},
      {"revision", nullptr},
  };
  write_json_file(dir / "adapter_config.json", config_json);
}

}  // namespace tokenmill
