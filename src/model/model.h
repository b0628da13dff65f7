// Model: a loaded model, from a Hugging Face directory (config.json + safetensors) or a
// GGUF file; either way a ModelConfig and ModelWeights viewing the mapped file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace tokenmill {

struct Model {
  std::filesystem::path path;  // the directory or the .gguf file
  ModelConfig config;
  SafetensorsArchive archive;    // Hugging Face directories
  std::optional<GgufFile> gguf;  // GGUF files
  ModelWeights weights;

  // A directory: dir/config.json (+ generation_config.json) and its safetensors weights.
  // A file: a GGUF model (model/gguf_model.h).
  static std::unique_ptr<Model> load(const std::filesystem::path& path);

  // Parameters the forward pass uses (a tied matrix counts once).
  int64_t parameter_count() const;
  // The KV cache type the transformer uses unless told otherwise: f16 for GGUF files
  // (llama.cpp's default and arithmetic); for Hugging Face models f32 when their matrices are
  // f32 (transformers' arithmetic), f16 when they are bf16 or f16 (transformers keeps such a
  // cache in bf16: half the bytes of f32, which decode reads whole for every token). An f16
  // cache means llama.cpp's attention arithmetic (Backend::attention): K, V, q and the softmax
  // probabilities rounded to f16 (11-bit significand, where bf16 has 8; but a range of
  // +-65504, where bf16 has f32's).
  DType default_kv_dtype() const;
  // Bytes of the weight files by stored type ("BF16", "Q4_1", ...).
  std::map<std::string, uint64_t> weight_bytes_by_type() const;
  // The bytes of the files whose tensors are used in place: the GGUF file, or the safetensors
  // shards; none for a model built in memory.
  std::vector<std::span<const std::byte>> mapped_files() const;
};

}  // namespace tokenmill
