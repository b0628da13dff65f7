// The training-op kernels: the fused softmax cross-entropy, the squared norm in double and
// the AdamW step. The math is in training_math.h, the geometry in training_kernels.h; every
// reduction has a fixed order (no atomics), so results are the same bits run to run.
#include "backend/cuda/training_kernels.h"

#include "backend/cuda/block_reduce.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/layer_geometry.h"

namespace tokenmill::cuda {

namespace {

// ---------------------------------------------------------------- cross_entropy

// The merge of every thread's partial, in a fixed tree (blockDim.x a power of two, at most
// kCrossEntropyThreads); every thread gets the row's partial.
__device__ LsePartial block_merge(LsePartial p, float* shared_max, double* shared_sum) {
  const int t = static_cast<int>(threadIdx.x);
  shared_max[t] = p.max;
  shared_sum[t] = p.sum;
  __syncthreads();
  for (int stride = static_cast<int>(blockDim.x) / 2; stride > 0; stride /= 2) {
    if (t < stride) {
      const LsePartial merged =
          lse_merge({shared_max[t], shared_sum[t]}, {shared_max[t + stride], shared_sum[t + stride]});
      shared_max[t] = merged.max;
      shared_sum[t] = merged.sum;
    }
    __syncthreads();
  }
  const LsePartial row{shared_max[0], shared_sum[0]};
  __syncthreads();  // every thread has its copy before the next row reuses the arrays
  return row;
}

// One block per row. In place (dlogits == logits) is safe: every read of the row other than
// a thread's own element happens before the barriers of block_merge, every write after.
__global__ void cross_entropy_kernel(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                                     float grad_scale, float* losses, float* dlogits) {
  __shared__ float shared_max[kCrossEntropyThreads];
  __shared__ double shared_sum[kCrossEntropyThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = logits + r * vocab;
    float* dx = dlogits == nullptr ? nullptr : dlogits + r * vocab;
    const int32_t target = targets[r];
    if (target < 0) {  // ignored: loss 0, zero gradient (the same branch for the whole block)
      if (threadIdx.x == 0) losses[r] = 0.0f;
      if (dx != nullptr)
        for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) dx[j] = 0.0f;
      continue;
    }
    const float target_logit = x[target];
    LsePartial p = lse_empty();
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) p = lse_add(p, x[j]);
    const LsePartial row = block_merge(p, shared_max, shared_sum);
    if (threadIdx.x == 0) losses[r] = cross_entropy_loss(row, target_logit);
    if (dx == nullptr) continue;
    const float scale = cross_entropy_scale(row, grad_scale);
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x)
      dx[j] = cross_entropy_grad(x[j], row.max, scale, grad_scale, j == target);
  }
}

// ---------------------------------------------------------------- sum_squares

struct SquareInDouble {  // exact: an f32 product fits a double
  __device__ double operator()(float v) const {
    const auto d = static_cast<double>(v);
    return d * d;
  }
};

struct Identity {
  __device__ double operator()(double v) const { return v; }
};

// sums[b] = sum of term(x[i]) over block b's chunk [b * chunk, min((b + 1) * chunk, count)).
template <class T, class Term>
__global__ void chunk_sums_kernel(const T* x, int64_t count, int64_t chunk, double* sums) {
  __shared__ double shared[32];
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * chunk;
  const int64_t end = count - begin < chunk ? count : begin + chunk;
  double s = 0.0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) s += Term{}(x[i]);
  s = block_sum(s, shared);
  if (threadIdx.x == 0) sums[blockIdx.x] = s;
}

// ---------------------------------------------------------------- adamw

__global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, int64_t count,
                             AdamWScalars scalars) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const AdamWElement e = adamw_update(scalars, param[i], grad[i], m[i], v[i]);
    param[i] = e.param;
    m[i] = e.m;
    v[i] = e.v;
  }
}

}  // namespace

void launch_cross_entropy(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                          float grad_scale, float* losses, float* dlogits, cudaStream_t stream) {
  if (rows == 0) return;
  cross_entropy_kernel<<<static_cast<unsigned>(cross_entropy_blocks(rows)), kCrossEntropyThreads, 0,
                         stream>>>(logits, targets, rows, vocab, grad_scale, losses, dlogits);
  TM_CUDA_CHECK_LAUNCH();
}

void launch_sum_squares(const float* x, int64_t count, double* partials, double* total, cudaStream_t stream) {
  const SumGeometry g = sum_geometry(count);
  if (g.blocks == 0) {
    TM_CUDA_CHECK(cudaMemsetAsync(total, 0, sizeof(double), stream));
    return;
  }
  chunk_sums_kernel<float, SquareInDouble>
      <<<static_cast<unsigned>(g.blocks), kSumThreads, 0, stream>>>(x, count, g.chunk, partials);
  TM_CUDA_CHECK_LAUNCH();
  chunk_sums_kernel<double, Identity><<<1, kSumThreads, 0, stream>>>(partials, g.blocks, g.blocks, total);
  TM_CUDA_CHECK_LAUNCH();
}

void launch_adamw(float* param, const float* grad, float* m, float* v, int64_t count,
                  const AdamWScalars& scalars, cudaStream_t stream) {
  if (count == 0) return;
  adamw_kernel<<<static_cast<unsigned>(elementwise_blocks(count)), kElementwiseThreads, 0, stream>>>(
      param, grad, m, v, count, scalars);
  TM_CUDA_CHECK_LAUNCH();
}

}  // namespace tokenmill::cuda
