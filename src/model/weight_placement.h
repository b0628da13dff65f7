// Placing a model's weights in a backend's memory (a GPU's) before a forward pass reads them.
#pragma once

#include <functional>

#include "core/device_memory.h"
#include "model/weights.h"

namespace tokenmill {

// Calls `fn` on every tensor the forward ops read, absent optional tensors included (their
// data is null). A tied lm_head is visited like any other: its data equals the embedding's.
void for_each_op_weight(ModelWeights& weights, const std::function<void(Tensor&)>& fn);

// Copies every tensor the forward ops read into `memory` and points the weights at the
// copies (weights.memory = &memory); tied tensors stay tied (one copy). Host memory, or
// weights already in `memory`: nothing to do. Placing weights that are already on another
// device is an Error. rope_freq_factors stays on the host (the frequencies are computed
// there once).
void place_weights(ModelWeights& weights, DeviceMemory& memory);

// True when ops running in `memory` can read the weights: they were placed there, or both
// are host memory. Forward passes check this before they start.
bool weights_in(const ModelWeights& weights, const DeviceMemory& memory);

}  // namespace tokenmill
