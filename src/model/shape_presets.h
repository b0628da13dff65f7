// Standard architectures by name, for measuring a shape without its weights (`tokenmill
// bench --shape NAME`): each preset is the ModelConfig parsed from the values of the model's
// published config.json, with the parameter count its publisher states, and where both
// figures come from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace tokenmill {

struct ShapePreset {
  std::string name;               // "smollm2-135m"
  std::string config_source;      // the config.json the values are taken from
  int64_t published_parameters;   // as its publisher rounds it (124M, 1.23B, ...)
  std::string parameters_source;  // where that count is stated
  ModelConfig config;
};

// Every preset, smallest first.
const std::vector<ShapePreset>& shape_presets();

// The preset called `name`; Error listing the known names otherwise.
const ShapePreset& shape_preset(const std::string& name);

}  // namespace tokenmill
