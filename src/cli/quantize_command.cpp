// quantize: a GGUF file (or a Hugging Face model directory) to a GGUF file at a weight type.
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "convert/quantize.h"
#include "core/error.h"

namespace tokenmill::cli {

namespace {

struct QuantizeFlags {
  std::string in, out, type;
  bool pure = false;
};

void print_line(std::string_view line) { fmt::print(stderr, "{}\n", line); }

}  // namespace

GgufWriteOptions gguf_write_options(const std::string& type, bool pure) {
  const auto dtype = parse_gguf_file_type(type);
  if (!dtype) fail("--type {}: unknown type (choose one of {})", type, kGgufFileTypeNames);
  return {.type = *dtype, .pure = pure, .log = print_line};
}

void add_quantize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "quantize",
      "Write a GGUF file with quantized weights, from a GGUF file or a Hugging Face model directory");
  auto f = std::make_shared<QuantizeFlags>();
  cmd->add_option("in", f->in, "A .gguf file or a Hugging Face model directory")->required();
  cmd->add_option("out", f->out, "The .gguf file to write")->required();
  cmd->add_option("--type", f->type, fmt::format("Weight type: {}", kGgufFileTypeNames))->required();
  cmd->add_flag(
      "--pure", f->pure,
      "Every weight matrix at --type (no llama.cpp mix: output.weight q6_k, some attn_v/ffn_down q6_k)");
  cmd->callback([f] {
    const GgufWriteReport report = quantize_model(f->in, f->out, gguf_write_options(f->type, f->pure));
    fmt::print("{}: {}\n", f->out, describe(report));
  });
}

}  // namespace tokenmill::cli
