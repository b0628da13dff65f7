// The norms' backward in three deterministic steps:
//  1. one block per row: the row sums in double (block_reduce.cuh), dx, and the row's
//     (mean, r) kept in scratch;
//  2. one thread per (chunk of rows, column): the chunk's parameter-gradient terms summed in
//     row order, in double (layer_geometry.h: norm_grad_grid);
//  3. one thread per gradient element: the accumulator plus the chunks' sums in chunk order.
#include "backend/cuda/norm_kernels.h"

#include "backend/cuda/block_reduce.cuh"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/grid_stride.cuh"
#include "backend/cuda/layer_geometry.h"
#include "backend/cuda/norm_math.h"

namespace tokenmill::cuda {

namespace {

// The row sums of each norm's backward, reduced over the block, combined by norm_math.h.
struct RmsNormRowSums {
  template <class W>
  __device__ RmsNormBackwardRow operator()(const float* xr, const W* weight, const float* dyr, int64_t d,
                                           float eps, double* shared) const {
    double sum_squares = 0, sum_gx = 0;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      sum_squares += static_cast<double>(xr[i]) * xr[i];
      sum_gx += static_cast<double>(to_float(weight[i])) * dyr[i] * xr[i];
    }
    sum_squares = block_sum(sum_squares, shared);
    sum_gx = block_sum(sum_gx, shared);
    return rms_norm_backward_row(sum_squares, sum_gx, d, eps);
  }
};

struct LayerNormRowSums {
  template <class W>
  __device__ LayerNormBackwardRow operator()(const float* xr, const W* weight, const float* dyr, int64_t d,
                                             float eps, double* shared) const {
    double sum = 0;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) sum += xr[i];
    const double mean = block_sum(sum, shared) / static_cast<double>(d);
    double sum_centered_squares = 0, sum_g = 0, sum_g_centered = 0;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const double centered = xr[i] - mean, g = static_cast<double>(to_float(weight[i])) * dyr[i];
      sum_centered_squares += centered * centered;
      sum_g += g;
      sum_g_centered += g * centered;
    }
    sum_centered_squares = block_sum(sum_centered_squares, shared);
    sum_g = block_sum(sum_g, shared);
    sum_g_centered = block_sum(sum_g_centered, shared);
    return layer_norm_backward_row(mean, sum_centered_squares, sum_g, sum_g_centered, d, eps);
  }
};

// Step 1: one block per row (blocks stride over rows); row_stats[row] = (mean, r). dx = g, or
// dx += g when `accumulate_dx` (the f32 addition add() would make).
template <class RowSums, class W>
__global__ void norm_backward_kernel(RowSums row_sums, const float* x, const W* weight, float eps,
                                     const float* dy, int64_t rows, int64_t d, bool accumulate_dx, float* dx,
                                     double* row_stats) {
  __shared__ double shared[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * d;
    const float* dyr = dy + row * d;
    float* dxr = dx + row * d;
    const auto stats = row_sums(xr, weight, dyr, d, eps, shared);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const float g = norm_dx(xr[i], to_float(weight[i]), dyr[i], stats);
      dxr[i] = accumulate_dx ? dxr[i] + g : g;
    }
    if (threadIdx.x == 0) {
      row_stats[2 * row] = stats.mean;
      row_stats[2 * row + 1] = stats.r;
    }
  }
}

// partials[chunk, 0, column] = sum over the chunk's rows of dy xhat, and with `bias`
// partials[chunk, 1, column] = sum of dy (grads = 1 or 2 rows per chunk).
__global__ void norm_grad_partials_kernel(const float* x, const float* dy, const double* row_stats,
                                          int64_t rows, int64_t d, int64_t rows_per_chunk, bool bias,
                                          double* partials) {
  const int64_t column = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (column >= d) return;
  const int64_t chunk = blockIdx.y, first = chunk * rows_per_chunk;
  const int64_t last = first + rows_per_chunk < rows ? first + rows_per_chunk : rows;
  double dweight = 0, dbias = 0;
  for (int64_t row = first; row < last; ++row) {
    const float dyi = dy[row * d + column];
    dweight += norm_dweight_term(x[row * d + column], dyi, row_stats[2 * row], row_stats[2 * row + 1]);
    dbias += dyi;
  }
  const int64_t grads = bias ? 2 : 1;
  partials[chunk * grads * d + column] = dweight;
  if (bias) partials[(chunk * grads + 1) * d + column] = dbias;
}

// Element j of [dweight | dbias] (grads * d): the accumulator plus the chunks in order.
struct AddChunkPartials {
  const double* partials;
  int64_t chunks, grads, d;
  float *dweight, *dbias;
  __device__ void operator()(int64_t j) const {
    float* grad = j < d ? dweight + j : dbias + (j - d);
    double sum = *grad;
    for (int64_t chunk = 0; chunk < chunks; ++chunk) sum += partials[chunk * grads * d + j];
    *grad = static_cast<float>(sum);
  }
};

// Steps 1 to 3; row_stats = scratch[0, 2 rows), the partials after them.
template <class RowSums>
void launch_norm_backward(const char* op, const float* x, const void* weight, DType weight_dtype, float eps,
                          const float* dy, int64_t rows, int64_t d, bool accumulate_dx, float* dx,
                          float* dweight, float* dbias, double* scratch, cudaStream_t stream) {
  if (rows == 0 || d == 0) return;  // no rows: the parameter gradients gain 0
  with_storage_type(weight_dtype, op, [&](auto w) {
    using W = decltype(w);
    norm_backward_kernel<<<static_cast<unsigned>(row_blocks(rows)), row_threads(d), 0, stream>>>(
        RowSums{}, x, static_cast<const W*>(weight), eps, dy, rows, d, accumulate_dx, dx, scratch);
    TM_CUDA_CHECK_LAUNCH();
  });
  const NormGradGrid grid = norm_grad_grid(rows, d);
  const int64_t grads = dbias != nullptr ? 2 : 1;
  double* partials = scratch + 2 * rows;
  norm_grad_partials_kernel<<<dim3(static_cast<unsigned>(grid.column_blocks),
                                   static_cast<unsigned>(grid.chunks)),
                              kNormGradThreads, 0, stream>>>(x, dy, scratch, rows, d, grid.rows_per_chunk,
                                                             dbias != nullptr, partials);
  TM_CUDA_CHECK_LAUNCH();
  launch_elementwise(grads * d, AddChunkPartials{partials, grid.chunks, grads, d, dweight, dbias}, stream);
}

}  // namespace

void launch_rms_norm_backward(const float* x, const void* weight, DType weight_dtype, float eps,
                              const float* dy, int64_t rows, int64_t d, bool accumulate_dx, float* dx,
                              float* dweight, double* scratch, cudaStream_t stream) {
  launch_norm_backward<RmsNormRowSums>("rms_norm_backward", x, weight, weight_dtype, eps, dy, rows, d,
                                       accumulate_dx, dx, dweight, nullptr, scratch, stream);
}

void launch_layer_norm_backward(const float* x, const void* weight, DType weight_dtype, float eps,
                                const float* dy, int64_t rows, int64_t d, bool accumulate_dx, float* dx,
                                float* dweight, float* dbias, double* scratch, cudaStream_t stream) {
  launch_norm_backward<LayerNormRowSums>("layer_norm_backward", x, weight, weight_dtype, eps, dy, rows, d,
                                         accumulate_dx, dx, dweight, dbias, scratch, stream);
}

}  // namespace tokenmill::cuda
