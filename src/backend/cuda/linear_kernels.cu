#include "backend/cuda/linear_kernels.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/linear_plan.h"

namespace tokenmill::cuda {

namespace {

// Grid-stride index ranges: elements along x, rows along y.
__device__ __forceinline__ int64_t first_x() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t stride_x() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

template <class T>
__global__ void embedding_kernel(const T* table, const int32_t* ids, int64_t n, int64_t d, float* out) {
  for (int64_t t = blockIdx.y; t < n; t += gridDim.y) {
    const T* row = table + static_cast<int64_t>(ids[t]) * d;
    for (int64_t c = first_x(); c < d; c += stride_x()) out[t * d + c] = to_float(row[c]);
  }
}

__global__ void combine_rows_kernel(const float* x, const int32_t* rows, const float* scales, int64_t n,
                                    int64_t k, int64_t d, float* y) {
  for (int64_t r = blockIdx.y; r < n; r += gridDim.y)
    for (int64_t c = first_x(); c < d; c += stride_x()) {
      float acc = 0.0f;
      for (int64_t j = r * k; j < (r + 1) * k; ++j)
        acc += scales[j] * x[static_cast<int64_t>(rows[j]) * d + c];
      y[r * d + c] = acc;
    }
}

template <class T>
__global__ void convert_kernel(const float* x, int64_t count, T* y) {
  for (int64_t i = first_x(); i < count; i += stride_x()) y[i] = from_float<T>(x[i]);
}

template <class T>
__global__ void broadcast_rows_kernel(const T* bias, int64_t rows, int64_t cols, float* y) {
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y)
    for (int64_t c = first_x(); c < cols; c += stride_x())
      y[r * cols + c] = bias != nullptr ? to_float(bias[c]) : 0.0f;
}

__global__ void add_column_sums_kernel(const float* dy, int64_t rows, int64_t cols, float* db) {
  for (int64_t c = first_x(); c < cols; c += stride_x()) {
    double sum = 0;
    for (int64_t r = 0; r < rows; ++r) sum += dy[r * cols + c];
    db[c] = static_cast<float>(db[c] + sum);
  }
}

__global__ void embedding_backward_kernel(const int32_t* group_ids, const int32_t* starts,
                                          const int32_t* tokens, int64_t groups, const float* dout, int64_t d,
                                          float* dtable) {
  for (int64_t g = blockIdx.y; g < groups; g += gridDim.y) {
    float* row = dtable + static_cast<int64_t>(group_ids[g]) * d;
    for (int64_t c = first_x(); c < d; c += stride_x()) {
      float acc = row[c];
      for (int32_t j = starts[g]; j < starts[g + 1]; ++j)
        acc += dout[static_cast<int64_t>(tokens[j]) * d + c];
      row[c] = acc;
    }
  }
}

dim3 blocks(const Grid& g) { return dim3(static_cast<unsigned>(g.x), static_cast<unsigned>(g.y)); }

}  // namespace

void launch_embedding(const void* table, DType dtype, const int32_t* ids, int64_t n, int64_t d, float* out,
                      cudaStream_t stream) {
  if (n == 0 || d == 0) return;
  with_storage_type(dtype, "embedding", [&](auto tag) {
    using T = decltype(tag);
    embedding_kernel<T><<<blocks(rows_grid(n, d)), kLinearThreads, 0, stream>>>(static_cast<const T*>(table),
                                                                                ids, n, d, out);
  });
  TM_CUDA_CHECK_LAUNCH();
}

void launch_combine_rows(const float* x, const int32_t* rows, const float* scales, int64_t n, int64_t k,
                         int64_t d, float* y, cudaStream_t stream) {
  if (n == 0 || d == 0) return;
  combine_rows_kernel<<<blocks(rows_grid(n, d)), kLinearThreads, 0, stream>>>(x, rows, scales, n, k, d, y);
  TM_CUDA_CHECK_LAUNCH();
}

void launch_convert(const float* x, int64_t count, void* y, DType dtype, cudaStream_t stream) {
  if (count == 0) return;
  with_storage_type(dtype, "convert", [&](auto tag) {
    using T = decltype(tag);
    convert_kernel<T>
        <<<blocks(elementwise_grid(count)), kLinearThreads, 0, stream>>>(x, count, static_cast<T*>(y));
  });
  TM_CUDA_CHECK_LAUNCH();
}

void launch_broadcast_rows(const void* bias, DType bias_dtype, int64_t rows, int64_t cols, float* y,
                           cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  with_storage_type(bias_dtype, "matmul bias", [&](auto tag) {
    using T = decltype(tag);
    broadcast_rows_kernel<T><<<blocks(rows_grid(rows, cols)), kLinearThreads, 0, stream>>>(
        static_cast<const T*>(bias), rows, cols, y);
  });
  TM_CUDA_CHECK_LAUNCH();
}

void launch_add_column_sums(const float* dy, int64_t rows, int64_t cols, float* db, cudaStream_t stream) {
  if (cols == 0) return;
  add_column_sums_kernel<<<blocks(elementwise_grid(cols)), kLinearThreads, 0, stream>>>(dy, rows, cols, db);
  TM_CUDA_CHECK_LAUNCH();
}

void launch_embedding_backward(const int32_t* group_ids, const int32_t* starts, const int32_t* tokens,
                               int64_t groups, const float* dout, int64_t d, float* dtable,
                               cudaStream_t stream) {
  if (groups == 0 || d == 0) return;
  embedding_backward_kernel<<<blocks(rows_grid(groups, d)), kLinearThreads, 0, stream>>>(
      group_ids, starts, tokens, groups, dout, d, dtable);
  TM_CUDA_CHECK_LAUNCH();
}

}  // namespace tokenmill::cuda
