// The elementwise launch of the layer ops: f(i) for every i < count, by blocks of
// kElementwiseThreads threads walking the range with a grid stride (layer_geometry.h), so a
// capped grid covers any count. f is a small struct holding its pointers; its operator()
// loads element i, calls the per-element math and stores.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/layer_geometry.h"

namespace tokenmill::cuda {

template <class F>
__global__ void for_each_element(int64_t count, F f) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) f(i);
}

// Queues for_each_element on `stream`; nothing when count is 0.
template <class F>
void launch_elementwise(int64_t count, F f, cudaStream_t stream) {
  const int64_t blocks = elementwise_blocks(count);
  if (blocks == 0) return;
  for_each_element<<<static_cast<unsigned>(blocks), kElementwiseThreads, 0, stream>>>(count, f);
  TM_CUDA_CHECK_LAUNCH();
}

}  // namespace tokenmill::cuda
