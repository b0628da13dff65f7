// Model: a loaded Hugging Face model directory (config + mapped weights).
#pragma once

#include <filesystem>
#include <memory>

#include "model/model_config.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace tokenmill {

struct Model {
  std::filesystem::path dir;
  ModelConfig config;
  SafetensorsArchive archive;
  ModelWeights weights;

  // Loads dir/config.json (+ generation_config.json) and the safetensors weights.
  static std::unique_ptr<Model> load(const std::filesystem::path& dir);

  // Parameters the forward pass uses (a tied matrix counts once).
  int64_t parameter_count() const;
};

}  // namespace tokenmill
