#include "backend/cuda/norm_kernels.h"

#include "backend/cuda/block_reduce.cuh"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/layer_geometry.h"
#include "backend/cuda/norm_math.h"

namespace tokenmill::cuda {

namespace {

// One block per row (blocks stride over rows), f32 sums reduced by a fixed tree. Every read
// of a row's x comes before the reduction's barrier and each thread writes only elements it
// read itself, so y may be x.
template <class W>
__global__ void rms_norm_kernel(const float* x, const W* weight, float eps, int64_t rows, int64_t d,
                                float* y) {
  __shared__ float shared[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * d;
    float* yr = y + row * d;
    float sum_squares = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) sum_squares += xr[i] * xr[i];
    const float r = norm_scale(block_sum(sum_squares, shared), d, eps);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
      yr[i] = rms_norm_element(xr[i], r, to_float(weight[i]));
  }
}

// Mean first, then the sum of squares about it (two passes: no cancellation for a large mean).
template <class W, class B>
__global__ void layer_norm_kernel(const float* x, const W* weight, const B* bias, float eps, int64_t rows,
                                  int64_t d, float* y) {
  __shared__ float shared[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * d;
    float* yr = y + row * d;
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) sum += xr[i];
    const float mean = block_sum(sum, shared) / static_cast<float>(d);
    float sum_squares = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) sum_squares += (xr[i] - mean) * (xr[i] - mean);
    const float r = norm_scale(block_sum(sum_squares, shared), d, eps);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
      yr[i] = layer_norm_element(xr[i], mean, r, to_float(weight[i]), to_float(bias[i]));
  }
}

}  // namespace

void launch_rms_norm(const float* x, const void* weight, DType weight_dtype, float eps, int64_t rows,
                     int64_t d, float* y, cudaStream_t stream) {
  if (rows == 0 || d == 0) return;
  with_storage_type(weight_dtype, "rms_norm", [&](auto w) {
    using W = decltype(w);
    rms_norm_kernel<<<static_cast<unsigned>(row_blocks(rows)), row_threads(d), 0, stream>>>(
        x, static_cast<const W*>(weight), eps, rows, d, y);
    TM_CUDA_CHECK_LAUNCH();
  });
}

void launch_layer_norm(const float* x, const void* weight, DType weight_dtype, const void* bias,
                       DType bias_dtype, float eps, int64_t rows, int64_t d, float* y, cudaStream_t stream) {
  if (rows == 0 || d == 0) return;
  with_storage_type(weight_dtype, "layer_norm", [&](auto w) {
    with_storage_type(bias_dtype, "layer_norm", [&](auto b) {
      using W = decltype(w);
      using B = decltype(b);
      layer_norm_kernel<<<static_cast<unsigned>(row_blocks(rows)), row_threads(d), 0, stream>>>(
          x, static_cast<const W*>(weight), static_cast<const B*>(bias), eps, rows, d, y);
      TM_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace tokenmill::cuda
