// Launcher of the softmax kernel (backend.h: softmax): per row of x [rows, d] (f32 device
// array), y = exp(x - max) / sum exp(x - max). y may be x (in place). Arguments are checked by
// the caller (backend/checks/layer_checks.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tokenmill::cuda {

void launch_softmax(const float* x, int64_t rows, int64_t d, float* y, cudaStream_t stream);

}  // namespace tokenmill::cuda
