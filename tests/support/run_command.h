// Runs the tokenmill binary under test as a user would, capturing its output.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "support/temp_dir.h"

namespace tokenmill::testing {

struct CommandResult {
  int exit_code = -1;  // -1: killed by a signal
  std::string output;  // stdout, plus stderr when asked
};

// Runs `TOKENMILL_BINARY args` through the shell; `input` is fed to its standard input.
inline CommandResult run_tokenmill(const std::string& args, bool with_stderr = true,
                                   const std::string& input = "") {
  const TempDir dir;
  const auto stdin_file = dir.write("stdin", input);
  const std::string command = std::string(TOKENMILL_BINARY) + " " + args + " < " + stdin_file.string() +
                              (with_stderr ? " 2>&1" : " 2>/dev/null");
  CommandResult r;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) r.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace tokenmill::testing
