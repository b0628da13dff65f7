// `tokenmill export`: a training checkpoint to a Hugging Face model directory
// (model/hf_export.h) with the tokenizer files of the run next to it, so transformers
// and tokenmill load the trained model as any other.
#pragma once

#include <filesystem>

#include "core/dtype.h"

namespace tokenmill {

// The newest checkpoint of a run directory (run/checkpoints/step_*.tmckpt); Error if none.
std::filesystem::path run_checkpoint(const std::filesystem::path& run_dir);

// Writes out_dir from `checkpoint`: config.json, generation_config.json, model.safetensors
// (as `dtype`) and the tokenizer files (tokenizer.json, plus tokenizer_config.json and
// special_tokens_map.json when they sit next to it) of the run's model or dataset.
void export_checkpoint(const std::filesystem::path& checkpoint, const std::filesystem::path& out_dir,
                       DType dtype);

}  // namespace tokenmill
