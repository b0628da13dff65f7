#include "model/model.h"

#include "core/error.h"
#include "model/gguf_model.h"

namespace tokenmill {

std::unique_ptr<Model> Model::load(const std::filesystem::path& path) {
  auto model = std::make_unique<Model>();
  model->path = path;
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    model->gguf = GgufFile::open(path);
    model->config = gguf_model_config(*model->gguf);
    load_gguf_weights(model->config, *model->gguf, model->weights);
    return model;
  }
  if (!std::filesystem::exists(path, ec))
    fail("model '{}' does not exist (expected a model directory or a .gguf file)", path.string());
  model->config = load_model_config(path);
  model->archive = SafetensorsArchive::open(path);
  load_weights(model->config, model->archive, model->weights);
  return model;
}

std::vector<std::span<const std::byte>> Model::mapped_files() const {
  if (gguf) return {gguf->bytes()};
  return archive.file_bytes();
}

int64_t Model::parameter_count() const {
  const auto count = [](const Tensor& t) { return t.data != nullptr ? t.numel() : 0; };
  const ModelWeights& w = weights;
  int64_t n = count(w.token_embedding) + count(w.position_embedding) + count(w.final_norm_weight) +
              count(w.final_norm_bias);
  if (w.lm_head.data != w.token_embedding.data) n += count(w.lm_head);
  for (const LayerWeights& l : w.layers) {
    for (const Tensor* t : {&l.attn_norm_weight, &l.attn_norm_bias, &l.q, &l.k, &l.v, &l.o, &l.q_bias,
                            &l.k_bias, &l.v_bias, &l.o_bias, &l.mlp_norm_weight, &l.mlp_norm_bias, &l.gate,
                            &l.gate_bias, &l.up, &l.up_bias, &l.down, &l.down_bias})
      n += count(*t);
  }
  return n;
}

DType Model::default_kv_dtype() const {
  if (gguf) return DType::F16;
  const bool f32_matrices = weights.layers.empty() || weights.layers.front().q.dtype == DType::F32;
  return f32_matrices ? DType::F32 : DType::F16;
}

std::map<std::string, uint64_t> Model::weight_bytes_by_type() const {
  if (!gguf) return archive.bytes_by_dtype();
  std::map<std::string, uint64_t> out;
  for (const GgufTensorInfo& t : gguf->tensors())
    out[std::string(ggml_type_traits(t.type)->name)] += t.nbytes;
  return out;
}

}  // namespace tokenmill
