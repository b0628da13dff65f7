#include "backend/cuda/norm_kernels.h"

#include <type_traits>

#include "backend/cuda/block_reduce.cuh"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/layer_geometry.h"
#include "backend/cuda/norm_math.h"

namespace tokenmill::cuda {

namespace {

// The rows of one norm launch: a row's x, or with kResidual (add_rms_norm, add_layer_norm)
// sum = x + delta, which the first pass writes and the later passes read back. Each thread
// reads back (sum) and writes (y) only the elements it read on the first pass, so y may be x
// when there is no residual add; with one, sum may be x or delta and y is disjoint. The
// choice is a template argument, not a pointer chosen at run time, so that the compiler
// keeps every access global (ld.global).
template <bool kResidual>
struct Row {
  const float* x;
  const float* delta;
  float* sum;

  __device__ Row(const float* x_rows, const float* delta_rows, float* sum_rows, int64_t row, int64_t d)
      : x(x_rows + row * d),
        delta(kResidual ? delta_rows + row * d : nullptr),
        sum(kResidual ? sum_rows + row * d : nullptr) {}
  // Element i on the first pass (writing sum[i] with a residual add).
  __device__ float first_read(int64_t i) const {
    if constexpr (kResidual) {
      const float s = x[i] + delta[i];
      sum[i] = s;
      return s;
    } else {
      return x[i];
    }
  }
  // What the later passes read.
  __device__ const float* values() const { return kResidual ? sum : x; }
};

// One block per row (blocks stride over rows), f32 sums reduced by a fixed tree.
template <bool kResidual, class W>
__global__ void rms_norm_kernel(const float* x, const float* delta, float* sum, const W* weight, float eps,
                                int64_t rows, int64_t d, float* y) {
  __shared__ float shared[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const Row<kResidual> in(x, delta, sum, row, d);
    float* yr = y + row * d;
    float sum_squares = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const float v = in.first_read(i);
      sum_squares += v * v;
    }
    const float r = norm_scale(block_sum(sum_squares, shared), d, eps);
    const float* xr = in.values();
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
      yr[i] = rms_norm_element(xr[i], r, to_float(weight[i]));
  }
}

// Mean first, then the sum of squares about it (two passes: no cancellation for a large mean).
template <bool kResidual, class W, class B>
__global__ void layer_norm_kernel(const float* x, const float* delta, float* sum, const W* weight,
                                  const B* bias, float eps, int64_t rows, int64_t d, float* y) {
  __shared__ float shared[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const Row<kResidual> in(x, delta, sum, row, d);
    float* yr = y + row * d;
    float total = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) total += in.first_read(i);
    const float mean = block_sum(total, shared) / static_cast<float>(d);
    const float* xr = in.values();
    float sum_squares = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) sum_squares += (xr[i] - mean) * (xr[i] - mean);
    const float r = norm_scale(block_sum(sum_squares, shared), d, eps);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
      yr[i] = layer_norm_element(xr[i], mean, r, to_float(weight[i]), to_float(bias[i]));
  }
}

// Calls launch(std::bool_constant<kResidual>{}, grid, block) for the rows of `in`, one block
// per row: kResidual when there is a residual add.
template <class Launch>
void launch_rows(const NormRows& in, int64_t rows, int64_t d, Launch launch) {
  const dim3 grid(static_cast<unsigned>(row_blocks(rows))), block(row_threads(d));
  if (in.delta != nullptr) {
    launch(std::true_type{}, grid, block);
  } else {
    launch(std::false_type{}, grid, block);
  }
}

}  // namespace

void launch_rms_norm(const NormRows& in, const void* weight, DType weight_dtype, float eps, int64_t rows,
                     int64_t d, float* y, cudaStream_t stream) {
  if (rows == 0 || d == 0) return;
  with_storage_type(weight_dtype, "rms_norm", [&](auto w) {
    using W = decltype(w);
    launch_rows(in, rows, d, [&](auto residual, dim3 grid, dim3 block) {
      rms_norm_kernel<decltype(residual)::value><<<grid, block, 0, stream>>>(
          in.x, in.delta, in.sum, static_cast<const W*>(weight), eps, rows, d, y);
      TM_CUDA_CHECK_LAUNCH();
    });
  });
}

void launch_layer_norm(const NormRows& in, const void* weight, DType weight_dtype, const void* bias,
                       DType bias_dtype, float eps, int64_t rows, int64_t d, float* y, cudaStream_t stream) {
  if (rows == 0 || d == 0) return;
  with_storage_type(weight_dtype, "layer_norm", [&](auto w) {
    with_storage_type(bias_dtype, "layer_norm", [&](auto b) {
      using W = decltype(w);
      using B = decltype(b);
      launch_rows(in, rows, d, [&](auto residual, dim3 grid, dim3 block) {
        layer_norm_kernel<decltype(residual)::value>
            <<<grid, block, 0, stream>>>(in.x, in.delta, in.sum, static_cast<const W*>(weight),
                                         static_cast<const B*>(bias), eps, rows, d, y);
        TM_CUDA_CHECK_LAUNCH();
      });
    });
  });
}

}  // namespace tokenmill::cuda
