// convert: a Hugging Face model directory to a GGUF file llama.cpp loads.
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "convert/hf_to_gguf.h"

namespace tokenmill::cli {

namespace {

struct ConvertFlags {
  std::string in, out, type = "f16";
  bool pure = false;
};

}  // namespace

void add_convert_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("convert", "Convert a Hugging Face model directory to a GGUF file");
  auto f = std::make_shared<ConvertFlags>();
  cmd->add_option("in", f->in, "Model directory: config.json, *.safetensors, tokenizer.json")->required();
  cmd->add_option("out", f->out, "The .gguf file to write")->required();
  cmd->add_option(
      "--type", f->type,
      fmt::format("Weight type (default f16): f32, f16, bf16, or a quantized type: {}", kGgufFileTypeNames));
  cmd->add_flag("--pure", f->pure, "With a quantized --type: every weight matrix at that type");
  cmd->callback([f] {
    const GgufWriteReport report = convert_hf_to_gguf(f->in, f->out, gguf_write_options(f->type, f->pure));
    fmt::print("{}: {}\n", f->out, describe(report));
  });
}

}  // namespace tokenmill::cli
