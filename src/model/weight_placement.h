// Placing a model's weights in a backend's memory (a GPU's) before a forward pass reads them.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/device_memory.h"
#include "model/model.h"
#include "model/weights.h"

namespace tokenmill {

// Error unless `memory` has `bytes` available (DeviceMemory::available) for `what` ("the
// model's weights"), saying how much is needed and how much is free. Checked before a model's
// weights are copied anywhere, so that a model too large is refused at once with its size, not
// killed or failed halfway through the copy.
void check_room_for(DeviceMemory& memory, uint64_t bytes, std::string_view what);

// Copies every tensor the forward ops read into `memory` and points the weights at the
// copies (weights.memory = &memory); tied tensors stay tied (one copy). Host memory, or
// weights already in `memory`: nothing to do. Placing weights that are already on another
// device, or more weights than the device has room for (check_room_for), is an Error.
// rope_freq_factors stays on the host (the frequencies are computed there once).
void place_weights(ModelWeights& weights, DeviceMemory& memory);

// Where a model run on the CPU reads its weights (`--no-mmap` picks Copied).
enum class HostWeights {
  Mapped,  // in place from the mapped files: zero copies, whatever pages the page cache holds
  Copied,  // from one copy in the process's memory (copy_mapped_weights)
};

// The distinct tensors (a tied matrix once) the forward ops read in place from the model's
// mapped files (Model::mapped_files). Empty once they were copied (place_weights,
// copy_mapped_weights), and for a model built in memory.
std::vector<Tensor> mapped_op_weights(Model& model);

// Copies mapped_op_weights into one block of host memory (on 2 MiB pages where the kernel
// grants them; see host_memory()) held by model.weights.placed, and points the weights at the
// copies; tied tensors stay tied. For a model run on the CPU: its decode streams the weights
// at the bandwidth of 2 MiB pages whatever pages the page cache holds the file in (a file
// written or read in small pieces sits in 4 KiB pages). The files stay mapped (metadata, and
// tensors computed from at load only). A later place_weights frees the copies: views of the
// weights taken in between dangle. Weights already on a device: Error.
void copy_mapped_weights(Model& model);

// True when ops running in `memory` can read the weights: they were placed there, or both
// are host memory. Forward passes check this before they start.
bool weights_in(const ModelWeights& weights, const DeviceMemory& memory);

}  // namespace tokenmill
