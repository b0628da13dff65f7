#include "model/hf_export.h"

#include <fmt/format.h>

#include <cstring>

#include "core/atomic_file.h"
#include "core/error.h"
#include "formats/safetensors_writer.h"
#include "model/arch/architecture.h"

namespace tokenmill {

namespace {

// Writes `count` values value(i) as `dtype` into out.
template <class Value>
void store(std::span<std::byte> out, DType dtype, int64_t count, const Value& value) {
  for (int64_t i = 0; i < count; ++i) {
    const float v = value(i);
    if (dtype == DType::F32) {
      std::memcpy(out.data() + 4 * i, &v, 4);
    } else {
      const uint16_t h = dtype == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
}

float at(const Tensor& t, int64_t i) { return load_as_f32(t.data, t.dtype, static_cast<size_t>(i)); }

class Exporter {
 public:
  Exporter(SafetensorsWriter& writer, DType dtype) : writer_(writer), dtype_(dtype) {}

  // A tensor as it is (matrix [rows, cols] or vector [n]).
  void same(const std::string& name, const Tensor& t) { add_converted_tensor(writer_, name, t, dtype_); }
  // A Gemma norm weight: the engine multiplies by 1 + w, the checkpoint stores w.
  void less_one(const std::string& name, const Tensor& t) {
    if (t.data == nullptr) fail("export: the model has no tensor for {}", name);
    writer_.add(name, dtype_, {t.numel()}, [t, dtype = dtype_](std::span<std::byte> out) {
      store(out, dtype, t.numel(), [&](int64_t i) { return at(t, i) - 1.0f; });
    });
  }
  // Row-blocks [parts[0]; parts[1]; ...] of [rows_p, cols] matrices (a fused q|k|v), or
  // concatenated vectors; with `transposed` a matrix is stored [cols, sum rows_p] (GPT-2's
  // Conv1D layout).
  void stacked(const std::string& name, std::vector<Tensor> parts, bool transposed) {
    const bool vector = parts.front().rank == 1;
    const int64_t cols = vector ? 1 : parts.front().cols();
    int64_t rows = 0;
    for (const Tensor& p : parts) rows += p.dim(0);
    transposed = transposed && !vector;
    const std::vector<int64_t> shape = vector       ? std::vector<int64_t>{rows}
                                       : transposed ? std::vector<int64_t>{cols, rows}
                                                    : std::vector<int64_t>{rows, cols};
    writer_.add(name, dtype_, shape,
                [parts, rows, cols, transposed, dtype = dtype_](std::span<std::byte> out) {
                  // Output element i is row r (of the stacked parts), column c.
                  store(out, dtype, rows * cols, [&](int64_t i) {
                    const int64_t c = transposed ? i / rows : i % cols, r = transposed ? i % rows : i / cols;
                    int64_t base = 0;
                    for (const Tensor& p : parts) {
                      if (r < base + p.dim(0)) return at(p, (r - base) * cols + c);
                      base += p.dim(0);
                    }
                    return 0.0f;
                  });
                });
  }

 private:
  SafetensorsWriter& writer_;
  DType dtype_;
};

// Every tensor of `w` under the Hugging Face names of `layout`.
void add_weights(const ModelConfig& c, const TensorLayout& layout, const ModelWeights& w, Exporter& e) {
  const std::string prefix(layout.hf_prefix);
  const auto model = [&](ModuleName m, const char* suffix) { return prefix + std::string(m.hf) + suffix; };
  const bool layer_norm = c.norm == NormKind::LayerNorm;
  // A norm's weight as the checkpoint stores it (Gemma's without the 1 the engine adds).
  const auto norm_weight = [&](const std::string& name, const Tensor& weight) {
    if (c.norm_weight_offset) {
      e.less_one(name, weight);
    } else {
      e.same(name, weight);
    }
  };
  e.same(model(layout.token_embedding, ".weight"), w.token_embedding);
  if (c.positions == PositionKind::Learned)
    e.same(model(layout.position_embedding, ".weight"), w.position_embedding);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const LayerWeights& l = w.layers[static_cast<size_t>(i)];
    const auto name = [&](ModuleName m, const char* suffix) {
      return prefix + layer_module_name(layout, WeightFormat::HuggingFace, i, m) + suffix;
    };
    const auto norm = [&](ModuleName m, const Tensor& weight, const Tensor& bias) {
      norm_weight(name(m, ".weight"), weight);
      if (layer_norm) e.same(name(m, ".bias"), bias);
    };
    const auto linear = [&](ModuleName m, std::vector<Tensor> weights, std::vector<Tensor> biases) {
      e.stacked(name(m, ".weight"), std::move(weights), layout.hf_transposed_linears);
      if (biases.front().data != nullptr) e.stacked(name(m, ".bias"), std::move(biases), false);
    };
    norm(layout.attn_norm, l.attn_norm_weight, l.attn_norm_bias);
    if (layout.qkv.present()) {
      linear(layout.qkv, {l.q, l.k, l.v}, {l.q_bias, l.k_bias, l.v_bias});
    } else {
      linear(layout.q, {l.q}, {l.q_bias});
      linear(layout.k, {l.k}, {l.k_bias});
      linear(layout.v, {l.v}, {l.v_bias});
    }
    if (c.qk_norm != QkNorm::None) {
      norm_weight(name(layout.q_norm, ".weight"), l.q_norm_weight);
      norm_weight(name(layout.k_norm, ".weight"), l.k_norm_weight);
    }
    linear(layout.o, {l.o}, {l.o_bias});
    if (c.sandwich_norms) norm_weight(name(layout.attn_post_norm, ".weight"), l.attn_post_norm_weight);
    norm(layout.mlp_norm, l.mlp_norm_weight, l.mlp_norm_bias);
    if (c.mixture_of_experts()) {  // each expert's matrices under its own name
      e.same(name(layout.router, ".weight"), l.router);
      for (int64_t x = 0; x < c.num_experts; ++x)
        for (const auto& [module, stacked] :
             {std::pair{layout.expert_gate, &l.expert_gate}, std::pair{layout.expert_up, &l.expert_up},
              std::pair{layout.expert_down, &l.expert_down}})
          e.same(prefix + expert_name(layer_module_name(layout, WeightFormat::HuggingFace, i, module), x) +
                     ".weight",
                 expert_matrix(*stacked, x, c.num_experts));
    } else if (layout.gate_up.present()) {
      linear(layout.gate_up, {l.gate, l.up}, {l.gate_bias, l.up_bias});
    } else {
      if (gated_mlp(c.mlp)) linear(layout.gate, {l.gate}, {l.gate_bias});
      linear(layout.up, {l.up}, {l.up_bias});
    }
    if (!c.mixture_of_experts()) linear(layout.down, {l.down}, {l.down_bias});
    if (c.sandwich_norms) norm_weight(name(layout.mlp_post_norm, ".weight"), l.mlp_post_norm_weight);
  }
  norm_weight(model(layout.final_norm, ".weight"), w.final_norm_weight);
  if (layer_norm) e.same(model(layout.final_norm, ".bias"), w.final_norm_bias);
  if (!c.tie_word_embeddings) e.same(std::string(layout.lm_head.hf) + ".weight", w.lm_head);
}

}  // namespace

void add_converted_tensor(SafetensorsWriter& writer, const std::string& name, const Tensor& t, DType dtype) {
  if (t.data == nullptr) fail("export: the model has no tensor for {}", name);
  std::vector<int64_t> shape(t.shape.begin(), t.shape.begin() + t.rank);
  writer.add(name, dtype, shape, [t, dtype](std::span<std::byte> out) {
    store(out, dtype, t.numel(), [&](int64_t i) { return at(t, i); });
  });
}

void write_json_file(const std::filesystem::path& path, const nlohmann::json& j) {
  const std::string text = j.dump(2) + "\n";
  AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

void export_hf_model(const ModelConfig& config, nlohmann::json config_json, const ModelWeights& weights,
                     DType dtype, const std::filesystem::path& dir) {
  if (dtype != DType::F32 && dtype != DType::BF16 && dtype != DType::F16)
    fail("export: --dtype must be f32, bf16 or f16, got {}", dtype_name(dtype));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("{}: cannot create the export directory ({})", dir.string(), ec.message());
  // A language model inside a multimodal checkpoint is written as its text-only architecture.
  const Architecture& architecture = architecture_of(config);
  const Architecture::Export& as = architecture.exported_as;
  if (as.text_model != nullptr) config_json = as.config_json(config_json);
  SafetensorsWriter writer;
  writer.set_metadata({{"format", "pt"}});
  Exporter exporter(writer, dtype);
  add_weights(config, *(as.text_model != nullptr ? as.text_model : &architecture)->layout, weights, exporter);
  writer.write(dir / "model.safetensors");
  // transformers 4 reads "torch_dtype", 5 reads "dtype": both say the weights' dtype.
  const char* dtype_key = dtype == DType::F32 ? "float32" : dtype == DType::BF16 ? "bfloat16" : "float16";
  config_json["torch_dtype"] = dtype_key;
  config_json["dtype"] = dtype_key;
  write_json_file(dir / "config.json", config_json);
  nlohmann::json generation = {{"_from_model_config", true}};
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"})
    if (config_json.contains(key)) generation[key] = config_json[key];
  write_json_file(dir / "generation_config.json", generation);
}

}  // namespace tokenmill
