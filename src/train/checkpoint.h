// Training checkpoints: everything needed to continue a run bit-exactly, in one file.
//
// Layout: 8 bytes "TMCKPT01", u64 n = length of a UTF-8 JSON header, the header, zero
// padding to a multiple of 64 bytes, then three f32 arrays of `count` values each: the
// parameters, AdamW's first and second moments. The header holds the format name
// ("tokenmill.checkpoint/1"), the step, the tokens seen, the optimizer's step count, the
// data loader position, the loss scaler state, the model's config.json, the run options,
// the parameter list (name, shape, offset, numel), count, and an FNV-1a hash of the arrays.
// A LoRA run's checkpoint holds the adapter's parameters (not the frozen base model) and a
// "lora" object: rank, alpha, targets and the base model directory it applies to.
// Parameters in a backend's memory (a GPU's) are copied to the host in chunks to be written,
// and copied back in on load: the file is the same whichever memory they trained in.
// Files are written with AtomicFile (a crash mid-write leaves the previous checkpoint);
// reading validates magic, sizes (overflow-checked), the parameter list against the model
// being trained, and the hash.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "train/data_loader.h"
#include "train/parameters.h"

namespace tokenmill {

struct CheckpointState {
  int64_t step = 0;
  int64_t tokens = 0;
  int64_t optimizer_steps = 0;
  LoaderPosition loader;
  double loss_scale = 1.0;
  int64_t scaler_growth_tracker = 0;
  nlohmann::json model_config;  // config.json of the model
  nlohmann::json options;       // the run's options, as given
  nlohmann::json lora;          // null: full model; else {rank, alpha, targets, base_model}
};

// Writes dir/step_<step>.tmckpt and removes all but the newest `keep` checkpoints there.
std::filesystem::path save_checkpoint(const std::filesystem::path& dir, const CheckpointState& state,
                                      const ParameterBuffers& params, int keep);

// The header of a checkpoint file (validated), without its arrays.
CheckpointState read_checkpoint_state(const std::filesystem::path& path);
// Fills params (values and moments) from the file; its parameter list must equal params'.
CheckpointState load_checkpoint(const std::filesystem::path& path, ParameterBuffers& params);

// The newest checkpoint in dir (highest step), or empty when there is none.
std::filesystem::path latest_checkpoint(const std::filesystem::path& dir);

}  // namespace tokenmill
