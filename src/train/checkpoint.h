// Training checkpoints: everything needed to continue a run bit-exactly, in one file.
//
// Layout: 8 bytes "TMCKPT02", u64 n = length of a UTF-8 JSON header, the header, zero
// padding to a multiple of 64 bytes, three f32 arrays of `count` values each (the
// parameters, AdamW's first and second moments), then a u64 FNV-1a hash of every byte
// before it: header and padding included, so no byte of the file can change unnoticed. The
// header holds the format name ("tokenmill.checkpoint/2"), the step, the tokens seen, the
// optimizer's step count, the data loader position, the loss scaler state, the model's
// config.json, the run options, the parameter list (name, shape, offset, numel) and count.
// Format 1 ("TMCKPT01", whose hash covered the arrays only) is refused with a message: its
// header cannot be verified.
// A LoRA run's checkpoint holds the adapter's parameters (not the frozen base model) and a
// "lora" object: rank, alpha, targets and the base model directory it applies to.
// Parameters in a backend's memory (a GPU's) are copied to the host in chunks to be written,
// and copied back in on load: the file is the same whichever memory they trained in.
// Files are written with AtomicFile (a crash mid-write leaves the previous checkpoint);
// reading checks the hash first, then sizes (overflow-checked) and the parameter list
// against the model being trained.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
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

// Passes moment array `which` (0: first, 1: second) of every parameter to `write`, in order
// and in pieces: where params holds only its ZeRO part of the moments (train/zero.h).
using MomentSource = std::function<void(int which, const std::function<void(std::span<const float>)>& write)>;

// Writes dir/step_<step>.tmckpt and removes all but the newest `keep` checkpoints there.
// The moments come from `moments` when given, else from params, which must hold them all.
std::filesystem::path save_checkpoint(const std::filesystem::path& dir, const CheckpointState& state,
                                      const ParameterBuffers& params, int keep,
                                      const MomentSource& moments = {});

// The header of a checkpoint file (validated), without its arrays.
CheckpointState read_checkpoint_state(const std::filesystem::path& path);
// Fills params (values, and the moments of params' part: all, or its ZeRO part) from the
// file; its parameter list must equal params'.
CheckpointState load_checkpoint(const std::filesystem::path& path, ParameterBuffers& params);

// The newest checkpoint in dir (highest step), or empty when there is none.
std::filesystem::path latest_checkpoint(const std::filesystem::path& dir);

// Told of each checkpoint passed over, and why (the Error's message).
using SkippedCheckpoint = std::function<void(const std::filesystem::path& path, const std::string& why)>;
// The newest checkpoint in dir that verifies (read_checkpoint_state accepts it), or empty
// when none does; each newer one that does not is reported to on_skipped (may be empty).
std::filesystem::path newest_valid_checkpoint(const std::filesystem::path& dir,
                                              const SkippedCheckpoint& on_skipped);

// Creates dir if needed and checks that a checkpoint can be written there (a file created
// and removed); throws Error naming it otherwise.
void check_checkpoint_dir(const std::filesystem::path& dir);

// Removes the temporaries (step_*.tmckpt.tmp) that a save interrupted by a crash left in
// dir, and returns their paths.
std::vector<std::filesystem::path> remove_stale_temporaries(const std::filesystem::path& dir);

}  // namespace tokenmill
