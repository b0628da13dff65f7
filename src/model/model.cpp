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
  int64_t n = 0;
  for_each_op_weight(weights, [&](const Tensor& t) {
    const bool tied_head = &t == &weights.lm_head && t.data == weights.token_embedding.data;
    if (t.data != nullptr && !tied_head) n += t.numel();
  });
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
