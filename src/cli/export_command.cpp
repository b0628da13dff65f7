// export: a training run's checkpoint to a Hugging Face model directory (train/export.h).
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "core/error.h"
#include "train/export.h"

namespace tokenmill::cli {

namespace {

struct ExportFlags {
  std::string run, checkpoint, out, dtype = "f32";
};

DType export_dtype(const std::string& name) {
  if (name == "f32") return DType::F32;
  if (name == "bf16") return DType::BF16;
  if (name == "f16") return DType::F16;
  fail("--dtype must be f32, bf16 or f16, got '{}'", name);
}

void run_export(const ExportFlags& f) {
  const DType dtype = export_dtype(f.dtype);
  const std::filesystem::path checkpoint =
      f.checkpoint.empty() ? run_checkpoint(f.run) : std::filesystem::path(f.checkpoint);
  export_checkpoint(checkpoint, f.out, dtype);
  fmt::print(
      "exported {} -> {} ({}): load it with `tokenmill generate -m {}` or transformers' from_pretrained\n",
      checkpoint.string(), f.out, f.dtype, f.out);
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto f = std::make_shared<ExportFlags>();
  CLI::App* cmd =
      app.add_subcommand("export", "Write a training checkpoint as a Hugging Face model directory");
  auto* run = cmd->add_option("--run", f->run, "Run directory of `tokenmill train` (its newest checkpoint)");
  auto* checkpoint = cmd->add_option("--checkpoint", f->checkpoint, "A checkpoint file (step_*.tmckpt)");
  run->excludes(checkpoint);
  cmd->add_option("--out", f->out, "Output directory")->required();
  cmd->add_option("--dtype", f->dtype, "Weight type in model.safetensors: f32, bf16 or f16");
  cmd->callback([f] {
    if (f->run.empty() && f->checkpoint.empty())
      fail("give the checkpoint: --run RUN_DIR or --checkpoint FILE");
    run_export(*f);
  });
}

}  // namespace tokenmill::cli
