// Which backend a command runs its model on (--device), with the model's weights placed in
// that backend's memory.
//
//   cpu       the CPU backend.
//   cuda[:N]  GPU N (0 by default) through the CUDA backend; Error saying why when this build
//             has no CUDA backend, the GPU cannot be used, or the model has a quantized tensor
//             that is not a matrix (the CUDA backend runs quantized matmul and embedding only).
//   auto      the first GPU when `cuda` would work; otherwise the CPU, and `note` says why
//             in one line (the one log line of the fallback).
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "model/model.h"
#include "model/weight_placement.h"

namespace tokenmill {

struct DeviceChoice {
  std::unique_ptr<Backend> backend;
  std::string note;  // why `auto` fell back to the CPU; empty otherwise
};

// Chooses the backend for `device` and places `model`'s weights in its memory; on the CPU,
// `host_weights` Copied copies them out of the mapped files (copy_mapped_weights).
DeviceChoice choose_device(const std::string& device, Model& model,
                           HostWeights host_weights = HostWeights::Mapped);

}  // namespace tokenmill
