// --device, for the commands that run a model (runtime/device_choice.h).
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "backend/backend.h"
#include "model/model.h"

namespace tokenmill::cli {

void add_device_flag(CLI::App& command, std::string& device);

// The backend for `device` with `model`'s weights in its memory; a fallback to the CPU is
// printed to stderr as one "note: ..." line.
std::unique_ptr<Backend> open_device(const std::string& device, Model& model);

}  // namespace tokenmill::cli
