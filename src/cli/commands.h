// Subcommand registration: each adds its flags to the app and sets a callback that calls
// one library entry point. Failures are thrown as tokenmill::Error and printed by main.
#pragma once

#include <CLI/CLI.hpp>

namespace tokenmill::cli {

void add_info_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_tokenize_commands(CLI::App& app);  // tokenize, detokenize
void add_chat_command(CLI::App& app);

}  // namespace tokenmill::cli
