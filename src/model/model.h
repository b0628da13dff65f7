// Model: a loaded model, from a Hugging Face directory (config.json + safetensors) or a
// GGUF file; either way a ModelConfig and ModelWeights viewing the mapped file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "model/gguf.h"
#include "model/model_config.h"
#include "model/safetensors.h"
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
  // (llama.cpp's default and arithmetic); for Hugging Face models the dtype of their matrices
  // as transformers keeps it, f32 for an f32 model, f16 for a bf16 or f16 one (transformers:
  // bf16, which rounds K and V more than f16's 11-bit significand; the cache is half the bytes
  // of f32 either way, and decode reads it whole for every token).
  DType default_kv_dtype() const;
  // Bytes of the weight files by stored type ("BF16", "Q4_1", ...).
  std::map<std::string, uint64_t> weight_bytes_by_type() const;
};

}  // namespace tokenmill
