#include "measure/bench_model.h"

#include <algorithm>
#include <cctype>
#include <map>

#include <fmt/format.h>

#include "core/error.h"
#include "measure/flops.h"
#include "model/weight_placement.h"

namespace tokenmill {

namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return text;
}

// The inference weights of `params` as `dtype`: the master tensors themselves for f32,
// otherwise every matrix rounded into `weights.owned` (a tied lm_head stays tied).
ModelWeights inference_weights(const ParameterSet& params, DType dtype) {
  ModelWeights weights = view_weights(params.weights());
  if (dtype == DType::F32) return weights;
  std::map<const void*, Tensor> rounded;  // by master address
  for_each_op_weight(weights, [&](Tensor& t) {
    if (t.data == nullptr || t.rank != 2) return;
    auto [it, fresh] = rounded.try_emplace(t.data);
    if (fresh) {
      it->second = weights.owned.allocate(dtype, {t.dim(0), t.dim(1)});
      const float* from = t.as<const float>();
      for (int64_t i = 0; i < t.numel(); ++i)
        store_from_f32(it->second.data, dtype, static_cast<size_t>(i), from[i]);
    }
    t = it->second;
  });
  return weights;
}

// Bytes of the tensors the forward reads (a tied matrix once).
uint64_t op_weight_bytes(ModelWeights& weights) {
  std::map<const void*, uint64_t> bytes;
  for_each_op_weight(weights, [&](Tensor& t) {
    if (t.data != nullptr) bytes.emplace(t.data, t.nbytes());
  });
  uint64_t total = 0;
  for (const auto& [data, n] : bytes) total += n;
  return total;
}

}  // namespace

BenchModel load_bench_model(const std::filesystem::path& path) {
  BenchModel m;
  m.model = Model::load(path);
  ModelSummary& s = m.summary;
  s.name = m.model->path.filename().string();
  s.architecture = m.model->config.architecture;
  s.parameters = m.model->parameter_count();
  uint64_t largest = 0;
  for (const auto& [dtype, bytes] : m.model->weight_bytes_by_type()) {
    s.weight_bytes += bytes;
    if (bytes > largest) {
      largest = bytes;
      s.weight_dtype = lower(dtype);
    }
  }
  return m;
}

std::string shape_list() {
  std::string out =
      fmt::format("{:<14} {:<20} {:>6} {:>6} {:>9} {:>6} {:>7} {:>14} {:>10}\n", "shape", "architecture",
                  "layers", "hidden", "heads/kv", "mlp", "vocab", "parameters", "published");
  for (const ShapePreset& p : shape_presets()) {
    const ModelConfig& c = p.config;
    out +=
        fmt::format("{:<14} {:<20} {:>6} {:>6} {:>9} {:>6} {:>7} {:>14} {:>9.3g}B\n", p.name, c.architecture,
                    c.num_hidden_layers, c.hidden_size,
                    fmt::format("{}/{}", c.num_attention_heads, c.num_key_value_heads), c.intermediate_size,
                    c.vocab_size, parameter_count(c), static_cast<double>(p.published_parameters) / 1e9);
  }
  out += "\nsources:\n";
  for (const ShapePreset& p : shape_presets())
    out += fmt::format("  {}: {}; parameters: {}\n", p.name, p.config_source, p.parameters_source);
  return out;
}

uint64_t synthetic_model_bytes(const ModelConfig& config, DType dtype) {
  const auto parameters = static_cast<uint64_t>(parameter_count(config));
  const uint64_t master = 4 * sizeof(float) * parameters;  // values, gradients, two moments
  return dtype == DType::F32 ? master : master + dtype_size(dtype) * parameters;
}

BenchModel synthetic_bench_model(const ShapePreset& preset, DType dtype, uint64_t seed,
                                 MemoryBudget& budget) {
  if (dtype != DType::F32 && dtype != DType::BF16 && dtype != DType::F16)
    fail("--dtype must be f32, bf16 or f16 for a synthetic model (got {})", dtype_name(dtype));
  budget.reserve(
      synthetic_model_bytes(preset.config, dtype),
      fmt::format("the random {} weights of {} ({} parameters, plus the f32 master copy, gradients "
                  "and AdamW moments)",
                  lower(std::string(dtype_name(dtype))), preset.name, parameter_count(preset.config)),
      "choose a smaller --shape (it is built as the f32 training copy whatever the phases)");
  BenchModel m;
  m.params = std::make_unique<ParameterSet>(preset.config);
  m.params->init_gpt2(seed);
  m.model = std::make_unique<Model>();
  m.model->path = preset.name;
  m.model->config = preset.config;
  m.model->weights = inference_weights(*m.params, dtype);
  m.summary = {preset.name,
               preset.config.architecture,
               m.model->parameter_count(),
               op_weight_bytes(m.model->weights),
               lower(std::string(dtype_name(dtype))),
               true};
  return m;
}

}  // namespace tokenmill
