// The CPU backend: every op multi-threaded (OpenMP, core/parallel.h) and vectorised, with
// the kernel set (AVX2 or AVX-512) chosen at run time; see kernels.h.
//
// Beyond the Backend contract it accepts: bf16/f16 for norm weights and biases, matmul
// bias and the KV cache (read as f32); and y == x exactly (in place) for the elementwise
// ops, the norms and softmax. Partial overlap of an output with an input throws.
// Scratch memory is thread-local and only grows, so the steady state never allocates;
// one backend object may be used from several threads at once.
#pragma once

#include <memory>

#include "backend/backend.h"
#include "backend/cpu/cpu_features.h"

namespace tokenmill {

// The CPU backend restricted to `isa` (tests run every op once per ISA the CPU has).
// Throws Error if this CPU cannot run `isa`.
std::unique_ptr<Backend> make_cpu_backend_for(CpuIsa isa);

}  // namespace tokenmill
