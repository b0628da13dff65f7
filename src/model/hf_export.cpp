#include "model/hf_export.h"

#include <fmt/format.h>

#include <cstring>

#include "core/atomic_file.h"
#include "core/error.h"
#include "formats/safetensors_writer.h"
#include "model/weight_source.h"

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
  // Row-blocks [parts[0]; parts[1]; ...] of [rows_p, cols] matrices, stored transposed as
  // [cols, sum rows_p] (GPT-2's Conv1D layout, fused q|k|v), or a concatenated vector.
  void conv1d(const std::string& name, std::vector<Tensor> parts) {
    const int64_t cols = parts.front().rank == 1 ? 1 : parts.front().cols();
    int64_t rows = 0;
    for (const Tensor& p : parts) rows += p.dim(0);
    const bool vector = parts.front().rank == 1;
    std::vector<int64_t> shape = vector ? std::vector<int64_t>{rows} : std::vector<int64_t>{cols, rows};
    writer_.add(name, dtype_, shape, [parts, rows, cols, vector, dtype = dtype_](std::span<std::byte> out) {
      // Output element (c, r) of [cols, rows] is row r (of the stacked parts), column c.
      store(out, dtype, rows * cols, [&](int64_t i) {
        const int64_t c = vector ? 0 : i / rows, r = vector ? i : i % rows;
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

void add_llama_family(const ModelConfig& c, const ModelWeights& w, Exporter& e) {
  const LlamaTensorNames& n = kHuggingFaceLlamaNames;
  e.same(n.token_embedding, w.token_embedding);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const LayerWeights& l = w.layers[static_cast<size_t>(i)];
    const std::string p = fmt::format(fmt::runtime(n.layer_prefix), i);
    const auto linear = [&](const std::string& name, const Tensor& weight, const Tensor& bias) {
      e.same(p + name + ".weight", weight);
      if (bias.data != nullptr) e.same(p + name + ".bias", bias);
    };
    e.same(p + n.attn_norm + ".weight", l.attn_norm_weight);
    linear(n.q, l.q, l.q_bias);
    linear(n.k, l.k, l.k_bias);
    linear(n.v, l.v, l.v_bias);
    linear(n.o, l.o, l.o_bias);
    e.same(p + n.mlp_norm + ".weight", l.mlp_norm_weight);
    linear(n.gate, l.gate, l.gate_bias);
    linear(n.up, l.up, l.up_bias);
    linear(n.down, l.down, l.down_bias);
  }
  e.same(n.final_norm, w.final_norm_weight);
  if (!c.tie_word_embeddings) e.same(n.lm_head, w.lm_head);
}

void add_gpt2(const ModelConfig& c, const ModelWeights& w, Exporter& e) {
  e.same("transformer.wte.weight", w.token_embedding);
  e.same("transformer.wpe.weight", w.position_embedding);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const LayerWeights& l = w.layers[static_cast<size_t>(i)];
    const std::string p = fmt::format("transformer.h.{}.", i);
    e.same(p + "ln_1.weight", l.attn_norm_weight);
    e.same(p + "ln_1.bias", l.attn_norm_bias);
    e.conv1d(p + "attn.c_attn.weight", {l.q, l.k, l.v});
    e.conv1d(p + "attn.c_attn.bias", {l.q_bias, l.k_bias, l.v_bias});
    e.conv1d(p + "attn.c_proj.weight", {l.o});
    e.same(p + "attn.c_proj.bias", l.o_bias);
    e.same(p + "ln_2.weight", l.mlp_norm_weight);
    e.same(p + "ln_2.bias", l.mlp_norm_bias);
    e.conv1d(p + "mlp.c_fc.weight", {l.up});
    e.same(p + "mlp.c_fc.bias", l.up_bias);
    e.conv1d(p + "mlp.c_proj.weight", {l.down});
    e.same(p + "mlp.c_proj.bias", l.down_bias);
  }
  e.same("transformer.ln_f.weight", w.final_norm_weight);
  e.same("transformer.ln_f.bias", w.final_norm_bias);
  if (!c.tie_word_embeddings) e.same("lm_head.weight", w.lm_head);
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
  SafetensorsWriter writer;
  writer.set_metadata({{"format", "pt"}});
  Exporter exporter(writer, dtype);
  if (config.model_type == "gpt2") {
    add_gpt2(config, weights, exporter);
  } else {
    add_llama_family(config, weights, exporter);
  }
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
