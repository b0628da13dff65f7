#include "backend/cuda/lora_kernels.h"

#include "backend/cuda/block_reduce.cuh"
#include "backend/cuda/cuda_check.h"

namespace tokenmill::cuda {

namespace {

__global__ void lora_shrink_kernel(const LoraSegmentEntry* segments, int64_t segment_count,
                                   int64_t covered_rows, const float* x, int64_t k, float* t) {
  const int lane = threadIdx.x % 32;
  const int64_t warp = threadIdx.x / 32;
  for (int64_t c = blockIdx.y; c < covered_rows; c += gridDim.y) {
    const LoraSegmentEntry s = segments[lora_segment_of(segments, segment_count, c)];
    const float* x_row = x + lora_row(s, c) * k;
    for (int64_t j = blockIdx.x * kLoraWarps + warp; j < s.rank;
         j += static_cast<int64_t>(gridDim.x) * kLoraWarps) {
      const float* a_row = s.a + j * k;
      float sum = 0.0f;
      for (int64_t i = lane; i < k; i += 32) sum += x_row[i] * a_row[i];
      sum = warp_reduce(sum, SumOp{});
      if (lane == 0) t[lora_first_t(s, c) + j] = sum;
    }
  }
}

__global__ void lora_expand_kernel(const LoraSegmentEntry* segments, int64_t segment_count,
                                   int64_t covered_rows, const float* t, float* y, int64_t m) {
  __shared__ float t_row[kLoraMaxRank];
  for (int64_t c = blockIdx.y; c < covered_rows; c += gridDim.y) {
    const LoraSegmentEntry s = segments[lora_segment_of(segments, segment_count, c)];
    const float* t_in = t + lora_first_t(s, c);
    __syncthreads();  // the previous row's readers are done with t_row
    for (int64_t j = threadIdx.x; j < s.rank; j += blockDim.x) t_row[j] = t_in[j];
    __syncthreads();
    float* y_row = y + lora_row(s, c) * m;
    for (int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; col < m;
         col += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const float* b_row = s.b + col * s.rank;
      float sum = 0.0f;
      for (int64_t j = 0; j < s.rank; ++j) sum += b_row[j] * t_row[j];
      y_row[col] += sum;
    }
  }
}

dim3 blocks(const Grid& g) { return dim3(static_cast<unsigned>(g.x), static_cast<unsigned>(g.y)); }

}  // namespace

void launch_add_lora(const LoraSegmentEntry* segments, int64_t segment_count, int64_t covered_rows,
                     int64_t max_rank, const float* x, int64_t k, float* t, float* y, int64_t m,
                     cudaStream_t stream) {
  if (covered_rows == 0 || m == 0) return;
  lora_shrink_kernel<<<blocks(lora_shrink_grid(covered_rows, max_rank)), kLoraThreads, 0, stream>>>(
      segments, segment_count, covered_rows, x, k, t);
  TM_CUDA_CHECK_LAUNCH();
  lora_expand_kernel<<<blocks(lora_expand_grid(covered_rows, m)), kLoraThreads, 0, stream>>>(
      segments, segment_count, covered_rows, t, y, m);
  TM_CUDA_CHECK_LAUNCH();
}

}  // namespace tokenmill::cuda
