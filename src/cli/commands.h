// Subcommand registration: each adds its flags to the app and sets a callback that calls
// one library entry point. Failures are thrown as tokenmill::Error and printed by main.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace tokenmill {
struct GgufWriteOptions;  // convert/model_source.h
}  // namespace tokenmill

namespace tokenmill::cli {

void add_info_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_tokenize_commands(CLI::App& app);  // tokenize, detokenize
void add_chat_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_prepare_command(CLI::App& app);  // training data
void add_train_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_cost_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_doctor_command(CLI::App& app);
void add_serve_command(CLI::App& app);  // the OpenAI-compatible server

// The status main returns when the command finished without throwing: a command whose
// output is a verdict (doctor) sets it non-zero without printing "error: ...".
inline int& command_exit_status() {
  static int status = 0;
  return status;
}

// --type and --pure of quantize/convert as options (Error naming the flag for an unknown type);
// notes go to stderr.
GgufWriteOptions gguf_write_options(const std::string& type, bool pure);

}  // namespace tokenmill::cli
