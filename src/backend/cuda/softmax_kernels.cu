#include "backend/cuda/softmax_kernels.h"

#include <math.h>

#include "backend/cuda/block_reduce.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/layer_geometry.h"

namespace tokenmill::cuda {

namespace {

// One block per row (blocks stride over rows). Each thread keeps to the same elements in
// every pass, so y may be x.
__global__ void softmax_kernel(const float* x, int64_t rows, int64_t d, float* y) {
  __shared__ float shared[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * d;
    float* yr = y + row * d;
    float max_value = -INFINITY;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) max_value = fmaxf(max_value, xr[i]);
    max_value = block_reduce(max_value, MaxOp{}, -INFINITY, shared);
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const float e = expf(xr[i] - max_value);
      yr[i] = e;
      sum += e;
    }
    const float inv = 1.0f / block_sum(sum, shared);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) yr[i] *= inv;
  }
}

}  // namespace

void launch_softmax(const float* x, int64_t rows, int64_t d, float* y, cudaStream_t stream) {
  if (rows == 0 || d == 0) return;
  softmax_kernel<<<static_cast<unsigned>(row_blocks(rows)), row_threads(d), 0, stream>>>(x, rows, d, y);
  TM_CUDA_CHECK_LAUNCH();
}

}  // namespace tokenmill::cuda
