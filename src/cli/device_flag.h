// --device, for the commands that run a model (runtime/device_choice.h).
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "backend/backend.h"
#include "model/model.h"
#include "model/weight_placement.h"

namespace tokenmill::cli {

void add_device_flag(CLI::App& command, std::string& device);
// --no-mmap: on the CPU, copy the weights out of the mapped model file (HostWeights::Copied).
void add_no_mmap_flag(CLI::App& command, HostWeights& host_weights);

// The backend for `device` with `model`'s weights in its memory (and, on the CPU, where
// `host_weights` says); a fallback to the CPU is printed to stderr as one "note: ..." line.
std::unique_ptr<Backend> open_device(const std::string& device, Model& model,
                                     HostWeights host_weights = HostWeights::Mapped);

}  // namespace tokenmill::cli
