// Deterministic reductions over one thread block: warp shuffles (a fixed butterfly), then the
// warps' results combined by warp 0 in warp order. No atomics, so the same inputs give the
// same bits on every run. blockDim.x must be a multiple of 32 (layer_geometry.h: row_threads).
#pragma once

#include <cuda_runtime.h>

namespace tokenmill::cuda {

struct SumOp {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

struct MaxOp {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};

// Every lane gets op over the warp's 32 values (identical bits in every lane: op is
// commutative and each lane combines the same pairs).
template <class T, class Op>
__device__ T warp_reduce(T v, Op op) {
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Every thread of the block gets op over the block's values; `identity` is op's neutral
// element. `shared` holds 32 T. Safe to call repeatedly with the same `shared`.
template <class T, class Op>
__device__ T block_reduce(T v, Op op, T identity, T* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_reduce(v, op);
  __syncthreads();  // an earlier call's readers are done with shared
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T w = lane < warps ? shared[lane] : identity;
    w = warp_reduce(w, op);
    if (lane == 0) shared[0] = w;
  }
  __syncthreads();
  return shared[0];
}

template <class T>
__device__ T block_sum(T v, T* shared) {
  return block_reduce(v, SumOp{}, T{0}, shared);
}

}  // namespace tokenmill::cuda
