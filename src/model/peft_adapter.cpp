#include "model/peft_adapter.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <span>
#include <vector>

#include "core/error.h"
#include "core/json_file.h"
#include "core/mapped_file.h"
#include "formats/safetensors.h"
#include "model/lora_modules.h"
#include "model/rope.h"

namespace tokenmill {

namespace {

using nlohmann::json;

constexpr std::string_view kTensorPrefix = "base_model.model.";
constexpr std::string_view kA = ".lora_A.weight", kB = ".lora_B.weight";

// adapter_config.json's values that decide the arithmetic.
struct AdapterConfig {
  int64_t rank = 0;
  double alpha = 0.0;
  bool rslora = false;
  json rank_pattern = json::object(), alpha_pattern = json::object();
  std::string base_model;
};

bool is_set(const json& config, const char* key) {
  const auto it = config.find(key);
  return it != config.end() && !it->is_null() && *it != false && *it != json::object() &&
         *it != json::array();
}

AdapterConfig read_config(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "adapter_config.json";
  if (!std::filesystem::is_regular_file(path))
    fail("{}: not a PEFT adapter directory (it has no adapter_config.json)", dir.string());
  const json j = read_json_file(path, 1u << 20);
  if (!j.is_object()) fail("{}: not a JSON object", path.string());
  if (!j.contains("peft_type") || j["peft_type"] != "LORA")
    fail("{}: peft_type is {}; only LoRA adapters (\"LORA\") are served", path.string(),
         j.contains("peft_type") ? j["peft_type"].dump() : "missing");
  if (j.contains("bias") && j["bias"] != "none")
    fail("{}: bias is {}; only adapters without bias terms (\"none\") are served", path.string(),
         j["bias"].dump());
  // Variants of LoRA whose tensors look like plain LoRA's but mean something else, or that
  // change more than the adapted layers: refused rather than served wrongly.
  for (const char* key : {"use_dora", "modules_to_save", "alora_invocation_tokens", "layer_replication",
                          "use_qalora", "use_bdlora", "lora_bias", "trainable_token_indices",
                          "target_parameters", "arrow_config", "megatron_config"})
    if (is_set(j, key))
      fail("{}: {} is {}; only plain LoRA adapters are served", path.string(), key, j[key].dump());
  // PiSSA, OLoRA, CorDA and LoftQ start from a changed base model: an adapter saved without
  // converting back to plain LoRA only fits that base.
  if (j.contains("init_lora_weights") && j["init_lora_weights"].is_string())
    for (const char* changed_base : {"pissa", "olora", "corda", "loftq"})
      if (j["init_lora_weights"].get<std::string>().starts_with(changed_base))
        fail(
            "{}: init_lora_weights is {}: such an adapter fits a changed base model; save it converted to "
            "plain "
            "LoRA (peft's path_initial_model_for_weight_conversion)",
            path.string(), j["init_lora_weights"].dump());
  AdapterConfig c;
  if (!j.contains("r") || !j["r"].is_number_integer() || j["r"].get<int64_t>() < 1)
    fail("{}: r must be an integer >= 1", path.string());
  c.rank = j["r"].get<int64_t>();
  if (!j.contains("lora_alpha") || !j["lora_alpha"].is_number() || !(j["lora_alpha"].get<double>() > 0.0))
    fail("{}: lora_alpha must be a number > 0", path.string());
  c.alpha = j["lora_alpha"].get<double>();
  c.rslora = is_set(j, "use_rslora");
  for (auto [key, pattern] :
       {std::pair{"rank_pattern", &c.rank_pattern}, std::pair{"alpha_pattern", &c.alpha_pattern}})
    if (j.contains(key) && !j[key].is_null()) {
      if (!j[key].is_object()) fail("{}: {} must be an object", path.string(), key);
      *pattern = j[key];
    }
  if (j.contains("base_model_name_or_path") && j["base_model_name_or_path"].is_string())
    c.base_model = j["base_model_name_or_path"].get<std::string>();
  return c;
}

// The value `pattern` gives `module`, as PEFT looks it up: the key equal to the module's name,
// else a key (a regular expression) that matches the name's end after a dot; null when none
// does. PEFT takes the first such key in the file's order, which a JSON object does not keep:
// keys that match with different values are refused.
const json* pattern_value(const json& pattern, const std::string& module, const std::filesystem::path& dir) {
  if (const auto exact = pattern.find(module); exact != pattern.end()) return &*exact;
  const json* found = nullptr;
  for (const auto& [key, value] : pattern.items()) {
    bool matches = false;
    try {
      matches = std::regex_match(module, std::regex("(.*\\.)?(" + key + ")"));
    } catch (const std::regex_error&) {
      fail("{}: adapter_config.json: '{}' is not a regular expression that can be matched", dir.string(),
           key);
    }
    if (!matches) continue;
    if (found != nullptr && *found != value)
      fail("{}: adapter_config.json: several keys of a pattern give {} different values; name it exactly",
           dir.string(), module);
    found = &value;
  }
  return found;
}

// A module's rank and scale, as PEFT gives them.
std::pair<int64_t, float> module_rank_scale(const AdapterConfig& c, const std::string& module,
                                            const std::filesystem::path& dir) {
  int64_t rank = c.rank;
  double alpha = c.alpha;
  if (const json* r = pattern_value(c.rank_pattern, module, dir)) {
    if (!r->is_number_integer() || r->get<int64_t>() < 1)
      fail("{}: adapter_config.json: rank_pattern gives {} for {}; a rank is an integer >= 1", dir.string(),
           r->dump(), module);
    rank = r->get<int64_t>();
  }
  if (const json* a = pattern_value(c.alpha_pattern, module, dir)) {
    if (!a->is_number() || !(a->get<double>() > 0.0))
      fail("{}: adapter_config.json: alpha_pattern gives {} for {}; alpha is a number > 0", dir.string(),
           a->dump(), module);
    alpha = a->get<double>();
  }
  const double scale = alpha / (c.rslora ? std::sqrt(static_cast<double>(rank)) : static_cast<double>(rank));
  return {rank, static_cast<float>(scale)};
}

// A and B of each adapted module, by module name.
struct ModuleTensors {
  const SafetensorsEntry* a = nullptr;
  const SafetensorsEntry* b = nullptr;
};

std::map<std::string, ModuleTensors> module_tensors(const std::vector<SafetensorsEntry>& entries,
                                                    const std::filesystem::path& file) {
  std::map<std::string, ModuleTensors> modules;
  for (const SafetensorsEntry& e : entries) {
    const std::string_view name = e.name;
    const bool is_a = name.ends_with(kA), is_b = name.ends_with(kB);
    if (!name.starts_with(kTensorPrefix) || !(is_a || is_b) ||
        name.size() <= kTensorPrefix.size() + kA.size())
      fail("{}: tensor '{}' is not a LoRA A or B weight (\"{}<module>{}\" / \"{}\")", file.string(), name,
           kTensorPrefix, kA, kB);
    if (!e.dtype)
      fail("{}: tensor '{}' is {}; LoRA weights are F32, BF16 or F16", file.string(), name, e.dtype_name);
    if (e.shape.size() != 2) fail("{}: tensor '{}' is not a matrix", file.string(), name);
    const std::string module(
        name.substr(kTensorPrefix.size(), name.size() - kTensorPrefix.size() - kA.size()));
    (is_a ? modules[module].a : modules[module].b) = &e;
  }
  return modules;
}

// A weight that is not finite would make every logit of its requests NaN: refused at load.
void require_finite(std::span<const float> values, const std::filesystem::path& file,
                    const std::string& module, std::string_view what) {
  if (!std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); }))
    fail("{}: module {}: {} holds a value that is not finite (inf or NaN)", file.string(), module, what);
}

float value_at(const MappedFile& file, const SafetensorsEntry& e, int64_t index) {
  return load_as_f32(file.bytes().data() + e.offset, *e.dtype, static_cast<size_t>(index));
}

}  // namespace

std::unique_ptr<LoraAdapter> read_peft_adapter(const ModelConfig& config, const std::filesystem::path& dir,
                                               DeviceMemory& memory) {
  const AdapterConfig adapter_config = read_config(dir);
  const std::filesystem::path file_path = dir / "adapter_model.safetensors";
  if (!std::filesystem::is_regular_file(file_path))
    fail(
        "{}: no adapter_model.safetensors (an adapter saved as adapter_model.bin can be rewritten with "
        "peft's "
        "save_pretrained(dir, safe_serialization=True))",
        dir.string());
  const MappedFile file(file_path);
  const std::vector<SafetensorsEntry> entries = parse_safetensors(file.bytes(), file_path.string());
  std::map<std::string, ModuleTensors> tensors = module_tensors(entries, file_path);

  auto adapter = std::make_unique<LoraAdapter>(memory);
  adapter->base_model = adapter_config.base_model;
  adapter->weights.scale = 1.0f;
  adapter->weights.layers.resize(static_cast<size_t>(config.num_hidden_layers));
  const bool interleaved = config.rope_layout == RopeLayout::Interleaved;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    for (const LoraModule& m : lora_modules(config, l)) {
      const auto found = tensors.find(m.name);
      if (found == tensors.end()) continue;
      const ModuleTensors t = found->second;
      tensors.erase(found);
      if (t.a == nullptr || t.b == nullptr)
        fail("{}: module {} has lora_{} but no lora_{}", file_path.string(), m.name, t.a ? "A" : "B",
             t.a ? "B" : "A");
      const auto [rank, scale] = module_rank_scale(adapter_config, m.name, dir);
      const int64_t in = lora_target_shape(config, m.parts.front().target)[1];
      int64_t out = 0;
      for (const LoraModule::Part& p : m.parts) out += p.rows;
      if (t.a->shape != std::vector<int64_t>{rank, in} || t.b->shape != std::vector<int64_t>{out, rank})
        fail(
            "{}: module {}: lora_A is [{}, {}] and lora_B [{}, {}]; this model and the adapter's r = {} need "
            "[{}, {}] and [{}, {}]",
            file_path.string(), m.name, t.a->shape[0], t.a->shape[1], t.b->shape[0], t.b->shape[1], rank,
            rank, in, out, rank);
      std::vector<float> host(static_cast<size_t>(rank * in));
      for (int64_t i = 0; i < rank * in; ++i) host[static_cast<size_t>(i)] = value_at(file, *t.a, i);
      require_finite(host, file_path, m.name, "lora_A");
      const Tensor a = adapter->store.copy_of(Tensor(host.data(), DType::F32, {rank, in}));
      int64_t first = 0;
      for (const LoraModule::Part& p : m.parts) {
        const bool permuted = interleaved && (p.target == LoraTarget::Q || p.target == LoraTarget::K);
        host.assign(static_cast<size_t>(p.rows * rank), 0.0f);
        for (int64_t row = 0; row < p.rows; ++row) {
          const int64_t source = first + (permuted ? interleaved_source_row(row, config.head_dim) : row);
          for (int64_t k = 0; k < rank; ++k)
            host[static_cast<size_t>(row * rank + k)] = scale * value_at(file, *t.b, source * rank + k);
        }
        require_finite(host, file_path, m.name, "lora_B times the scale");
        adapter->weights.layers[static_cast<size_t>(l)][static_cast<size_t>(p.target)] = {
            a, adapter->store.copy_of(Tensor(host.data(), DType::F32, {p.rows, rank}))};
        first += p.rows;
      }
      adapter->max_rank = std::max(adapter->max_rank, rank);
    }
  }
  if (!tensors.empty())
    fail("{}: module {} is not an adaptable linear layer of this {} model (its attention{} projections are)",
         file_path.string(), tensors.begin()->first, config.model_type,
         config.mixture_of_experts() ? "" : " and MLP");
  if (adapter->max_rank == 0) fail("{}: the adapter holds no LoRA weights", file_path.string());
  return adapter;
}

}  // namespace tokenmill
