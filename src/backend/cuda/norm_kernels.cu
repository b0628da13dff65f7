#include "backend/cuda/norm_kernels.h"

#include "backend/cuda/block_reduce.cuh"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/layer_geometry.h"
#include "backend/cuda/norm_math.h"

namespace tokenmill::cuda {

namespace {

// Row r of the rows a norm reads (norm_kernels.h).
__device__ NormRows row_of(const NormRows& in, int64_t r, int64_t d) {
  if (in.delta == nullptr) return {in.x + r * d, nullptr, nullptr};
  return {in.x + r * d, in.delta + r * d, in.sum + r * d};
}
// Element i of a row on the first pass, which writes sum[i] when there is a residual add.
__device__ float first_read(const NormRows& row, int64_t i) {
  if (row.delta == nullptr) return row.x[i];
  const float s = row.x[i] + row.delta[i];
  row.sum[i] = s;
  return s;
}
// What the later passes read: sum, read back only by the thread that wrote each element.
__device__ const float* read_back(const NormRows& row) { return row.delta == nullptr ? row.x : row.sum; }

// One block per row (blocks stride over rows), f32 sums reduced by a fixed tree. Every read
// of a row's x comes before the reduction's barrier and each thread writes only elements it
// read itself, so y may be x.
template <class W>
__global__ void rms_norm_kernel(NormRows source, const W* weight, float eps, int64_t rows, int64_t d,
                                float* y) {
  __shared__ float shared[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const NormRows in = row_of(source, row, d);
    float* yr = y + row * d;
    float sum_squares = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const float v = first_read(in, i);
      sum_squares += v * v;
    }
    const float r = norm_scale(block_sum(sum_squares, shared), d, eps);
    const float* xr = read_back(in);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
      yr[i] = rms_norm_element(xr[i], r, to_float(weight[i]));
  }
}

// Mean first, then the sum of squares about it (two passes: no cancellation for a large mean).
template <class W, class B>
__global__ void layer_norm_kernel(NormRows source, const W* weight, const B* bias, float eps, int64_t rows,
                                  int64_t d, float* y) {
  __shared__ float shared[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const NormRows in = row_of(source, row, d);
    float* yr = y + row * d;
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) sum += first_read(in, i);
    const float mean = block_sum(sum, shared) / static_cast<float>(d);
    const float* xr = read_back(in);
    float sum_squares = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) sum_squares += (xr[i] - mean) * (xr[i] - mean);
    const float r = norm_scale(block_sum(sum_squares, shared), d, eps);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
      yr[i] = layer_norm_element(xr[i], mean, r, to_float(weight[i]), to_float(bias[i]));
  }
}

}  // namespace

void launch_rms_norm(const NormRows& in, const void* weight, DType weight_dtype, float eps, int64_t rows,
                     int64_t d, float* y, cudaStream_t stream) {
  if (rows == 0 || d == 0) return;
  with_storage_type(weight_dtype, "rms_norm", [&](auto w) {
    using W = decltype(w);
    rms_norm_kernel<<<static_cast<unsigned>(row_blocks(rows)), row_threads(d), 0, stream>>>(
        in, static_cast<const W*>(weight), eps, rows, d, y);
    TM_CUDA_CHECK_LAUNCH();
  });
}

void launch_layer_norm(const NormRows& in, const void* weight, DType weight_dtype, const void* bias,
                       DType bias_dtype, float eps, int64_t rows, int64_t d, float* y, cudaStream_t stream) {
  if (rows == 0 || d == 0) return;
  with_storage_type(weight_dtype, "layer_norm", [&](auto w) {
    with_storage_type(bias_dtype, "layer_norm", [&](auto b) {
      using W = decltype(w);
      using B = decltype(b);
      layer_norm_kernel<<<static_cast<unsigned>(row_blocks(rows)), row_threads(d), 0, stream>>>(
          in, static_cast<const W*>(weight), static_cast<const B*>(bias), eps, rows, d, y);
      TM_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace tokenmill::cuda
