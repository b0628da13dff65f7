#include "train/lora_export.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "formats/safetensors_writer.h"
#include "model/hf_export.h"
#include "model/weight_source.h"

namespace tokenmill {

namespace {

// One adapted Hugging Face module: its full name, its target_modules entry and its tensors.
struct Module {
  std::string name, target;
  Tensor a, b;
};

std::string llama_module(LoraTarget t) {
  const LlamaTensorNames& n = kHuggingFaceLlamaNames;
  switch (t) {
    case LoraTarget::Q: return n.q;
    case LoraTarget::K: return n.k;
    case LoraTarget::V: return n.v;
    case LoraTarget::O: return n.o;
    case LoraTarget::Gate: return n.gate;
    case LoraTarget::Up: return n.up;
    case LoraTarget::Down: break;
  }
  return n.down;
}

std::vector<Module> llama_modules(const ModelConfig& config, const LoraConfig& lora,
                                  const LoraWeights& adapter) {
  std::vector<Module> modules;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l)
    for (const LoraTarget t : lora.targets) {
      const std::string relative = llama_module(t);
      const std::string target = relative.substr(relative.rfind('.') + 1);  // "q_proj"
      const LoraLinear& ad = adapter.at(l, t);
      modules.push_back(
          {fmt::format(fmt::runtime(kHuggingFaceLlamaNames.layer_prefix), l) + relative, target, ad.a, ad.b});
    }
  return modules;
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
    const std::string p = fmt::format("transformer.h.{}.", l);
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
      modules.push_back({p + "attn.c_attn", "c_attn", Tensor(a.data(), DType::F32, {m * r, hidden}),
                         Tensor(b.data(), DType::F32, {3 * hidden, m * r})});
    }
    const auto add = [&](LoraTarget t, const char* module) {
      if (!lora.targets_layer(t)) return;
      const LoraLinear& ad = adapter.at(l, t);
      modules.push_back({p + module, module, ad.a, ad.b});
    };
    add(LoraTarget::O, "attn.c_proj");
    add(LoraTarget::Up, "mlp.c_fc");
    add(LoraTarget::Down, "mlp.c_proj");
  }
  return modules;
}

}  // namespace

void export_peft_adapter(const ModelConfig& config, const LoraConfig& lora, const LoraWeights& adapter,
                         const std::string& base_model, DType dtype, const std::filesystem::path& dir) {
  const bool gpt2 = config.model_type == "gpt2";
  std::deque<std::vector<float>> fused;
  int64_t fused_parts = 0;
  const std::vector<Module> modules =
      gpt2 ? gpt2_modules(config, lora, adapter, fused, fused_parts) : llama_modules(config, lora, adapter);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("{}: cannot create the adapter directory ({})", dir.string(), ec.message());
  SafetensorsWriter writer;
  writer.set_metadata({{"format", "pt"}});
  nlohmann::json targets = nlohmann::json::array();
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
      {"target_modules", targets},
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
