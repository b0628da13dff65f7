// `tokenmill export`: a training checkpoint to a Hugging Face model directory
// (model/hf_export.h) with the tokenizer files of the run next to it, so transformers
// and tokenmill load the trained model as any other.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>

#include "core/dtype.h"
#include "train/checkpoint.h"

namespace tokenmill {

// The newest checkpoint of a run directory (run/checkpoints/step_*.tmckpt) that verifies,
// each newer damaged one reported to on_skipped; Error if none verifies.
std::filesystem::path run_checkpoint(const std::filesystem::path& run_dir,
                                     const SkippedCheckpoint& on_skipped = {});

// What a LoRA run's checkpoint exports as: the base model with the adapter merged
// (W + alpha / r B A; a full Hugging Face model) or the PEFT adapter (train/lora_export.h).
enum class LoraExport : uint8_t { Merged, Adapter };

// "f32", "bf16", "f16" / "merged", "adapter"; Error naming `flag` otherwise.
DType parse_export_dtype(std::string_view name, std::string_view flag = "--dtype");
LoraExport parse_lora_export(std::string_view name, std::string_view flag = "--lora");

// Writes out_dir from `checkpoint`: config.json, generation_config.json (the pretrained
// source model's when it has one, else built from config.json), model.safetensors (as
// `dtype`) and the tokenizer files (tokenizer.json, plus tokenizer_config.json,
// special_tokens_map.json and chat_template.jinja when they sit next to it) of the run's
// model or dataset. A LoRA checkpoint reads its base model (the directory it names, whose
// config.json must still be the one trained on) and exports as `lora` says; the adapter form
// writes the PEFT files and the tokenizer files. Error if `lora` is Adapter and the
// checkpoint is a full model, or the tokenizer is missing, before anything is written; the
// files are written beside out_dir and put in place together at the end (core/staged_directory.h).
void export_checkpoint(const std::filesystem::path& checkpoint, const std::filesystem::path& out_dir,
                       DType dtype, LoraExport lora = LoraExport::Merged);

}  // namespace tokenmill
