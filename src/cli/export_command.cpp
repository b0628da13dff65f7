// export: a training run's checkpoint to a Hugging Face model directory, or a LoRA run's
// adapter to a PEFT adapter directory (train/export.h).
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "core/error.h"
#include "train/export.h"

namespace tokenmill::cli {

namespace {

struct ExportFlags {
  std::string source, run, checkpoint, out, dtype = "f32", lora = "merged";
};

void warn_skipped(const std::filesystem::path& path, const std::string& why) {
  fmt::print(stderr, "warning: skipping checkpoint {}: {}\n", path.string(), why);
}

// The checkpoint: given as a file, or the newest of a run directory that verifies.
std::filesystem::path checkpoint_of(const ExportFlags& f) {
  if (!f.checkpoint.empty()) return f.checkpoint;
  if (!f.run.empty()) return run_checkpoint(f.run, warn_skipped);
  if (f.source.empty()) fail("give the checkpoint: RUN_DIR or CHECKPOINT_FILE (or --run / --checkpoint)");
  return std::filesystem::is_directory(f.source) ? run_checkpoint(f.source, warn_skipped)
                                                 : std::filesystem::path(f.source);
}

void run_export(const ExportFlags& f) {
  const DType dtype = parse_export_dtype(f.dtype);
  const LoraExport form = parse_lora_export(f.lora);
  const std::filesystem::path checkpoint = checkpoint_of(f);
  export_checkpoint(checkpoint, f.out, dtype, form);
  if (form == LoraExport::Adapter) {  // export_checkpoint refuses it for a full model
    fmt::print("exported the LoRA adapter of {} -> {} ({}): load it with peft's PeftModel.from_pretrained\n",
               checkpoint.string(), f.out, f.dtype);
    return;
  }
  fmt::print(
      "exported {} -> {} ({}): load it with `tokenmill generate -m {}` or transformers' from_pretrained\n",
      checkpoint.string(), f.out, f.dtype, f.out);
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto f = std::make_shared<ExportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "export",
      "Write a training checkpoint as a Hugging Face model directory (or a LoRA run as a PEFT adapter)");
  auto* source =
      cmd->add_option("source", f->source, "Run directory (its newest checkpoint) or checkpoint file");
  auto* run = cmd->add_option("--run", f->run, "Run directory of `tokenmill train` (its newest checkpoint)");
  auto* checkpoint = cmd->add_option("--checkpoint", f->checkpoint, "A checkpoint file (step_*.tmckpt)");
  run->excludes(checkpoint);
  source->excludes(run)->excludes(checkpoint);
  cmd->add_option("--out", f->out, "Output directory")->required();
  cmd->add_option("--dtype", f->dtype, "Weight type in model.safetensors: f32, bf16 or f16");
  cmd->add_option(
      "--lora", f->lora,
      "LoRA runs: merged (a full model, W + alpha/r B A) or adapter (PEFT's adapter_config.json + "
      "adapter_model.safetensors)");
  cmd->callback([f] { run_export(*f); });
}

}  // namespace tokenmill::cli
