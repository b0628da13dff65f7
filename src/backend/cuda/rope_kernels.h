// Launcher of the RoPE kernel (backend.h: rope and rope_backward), in place on f32 device
// arrays. Arguments are checked by the caller (backend/checks/layer_checks.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/rope_math.h"

namespace tokenmill::cuda {

// Rotates pairs j < half of every head of x [n, heads, head_dim] by positions[t] * inv_freq[j]
// (the negated angle when mode.inverse) and multiplies them by mode.magnitude; positions [n]
// and inv_freq [half] are device arrays. Neox pairs are (j, j + half), interleaved ones
// (2j, 2j + 1); elements past 2 * half are left as they are.
void launch_rope(float* x, const int32_t* positions, const float* inv_freq, int64_t n, int64_t heads,
                 int64_t head_dim, int64_t half, RopeMode mode, cudaStream_t stream);

}  // namespace tokenmill::cuda
