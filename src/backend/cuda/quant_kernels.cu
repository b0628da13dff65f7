// Kernels over ggml-quantized weights. Compiled with -fmad=false (src/backend/cuda/
// CMakeLists.txt): quant_block_math.h's f32 arithmetic must not be fused into FMAs.
#include "backend/cuda/quant_kernels.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/grid_stride.cuh"
#include "quant/quant_block_math.h"
#include "quant/quant_formats.h"

namespace tokenmill::cuda {

namespace {

using namespace quant;

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 4;   // warps per thread block, one weight row each
constexpr int kTokensPerWarp = 8;  // tokens a warp multiplies with each weight block it loads
constexpr int64_t kMaxTokenTiles = 65535;

// Calls f(Block{}) for the block struct of a quantized dtype (weights or activations).
template <class F>
void with_block(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Q4_0: f(BlockQ4_0{}); return;
    case DType::Q4_1: f(BlockQ4_1{}); return;
    case DType::Q5_0: f(BlockQ5_0{}); return;
    case DType::Q5_1: f(BlockQ5_1{}); return;
    case DType::Q8_0: f(BlockQ8_0{}); return;
    case DType::Q8_1: f(BlockQ8_1{}); return;
    case DType::MXFP4: f(BlockMXFP4{}); return;
    case DType::Q4_K: f(BlockQ4_K{}); return;
    case DType::Q5_K: f(BlockQ5_K{}); return;
    case DType::Q6_K: f(BlockQ6_K{}); return;
    case DType::Q8_K: f(BlockQ8_K{}); return;
    default: fail_unsupported_dtype("dequantize rows", dtype);
  }
}

// Calls f(Weights{}, Activations{}) for a weight type's block structs.
template <class F>
void with_weight_blocks(DType weights, F&& f) {
  switch (weights) {
    case DType::Q4_0: f(BlockQ4_0{}, BlockQ8_0{}); return;
    case DType::Q4_1: f(BlockQ4_1{}, BlockQ8_1{}); return;
    case DType::Q5_0: f(BlockQ5_0{}, BlockQ8_0{}); return;
    case DType::Q5_1: f(BlockQ5_1{}, BlockQ8_1{}); return;
    case DType::Q8_0: f(BlockQ8_0{}, BlockQ8_0{}); return;
    case DType::MXFP4: f(BlockMXFP4{}, BlockQ8_0{}); return;
    case DType::Q4_K: f(BlockQ4_K{}, BlockQ8_K{}); return;
    case DType::Q5_K: f(BlockQ5_K{}, BlockQ8_K{}); return;
    case DType::Q6_K: f(BlockQ6_K{}, BlockQ8_K{}); return;
    default: fail_unsupported_dtype("quantized matmul (weights)", weights);
  }
}

template <class Activations>
struct QuantizeBlock {
  const float* x;
  Activations* a;
  __device__ void operator()(int64_t i) const {
    Activations b;
    block::quantize(x + i * Activations::kWeights, b);
    a[i] = b;
  }
};

template <class Weights>
struct DequantizeBlock {
  const unsigned char* table;
  size_t row_bytes;
  const int32_t* ids;
  int64_t blocks_per_row;
  float* out;
  __device__ void operator()(int64_t i) const {
    const int64_t t = i / blocks_per_row, b = i % blocks_per_row;
    const auto blk = block::load<Weights>(table + static_cast<size_t>(ids[t]) * row_bytes, b);
    float* dst = out + i * Weights::kWeights;
    for (int j = 0; j < Weights::kWeights; ++j) dst[j] = block::weight(blk, j);
  }
};

// Warp (threadIdx.x / 32) of thread block (x, y) owns weight row r = x * kRowsPerBlock + warp
// and the token tiles y, y + gridDim.y, ... Lane l adds the terms of blocks l, l + 32, ... in
// order, then a butterfly over the lanes gives every lane the same sum.
template <class Weights, class Activations>
__global__ void quantized_matmul_kernel(const unsigned char* w, size_t w_row_bytes, const Activations* a,
                                        int64_t blocks_per_row, int64_t n, int64_t m, float* y) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (r >= m) return;  // the whole warp leaves together
  const unsigned char* row = w + static_cast<size_t>(r) * w_row_bytes;
  for (int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTokensPerWarp; t0 < n;
       t0 += static_cast<int64_t>(gridDim.y) * kTokensPerWarp) {
    const int tokens = static_cast<int>(min(static_cast<int64_t>(kTokensPerWarp), n - t0));
    float partial[kTokensPerWarp] = {};
    for (int64_t b = lane; b < blocks_per_row; b += kWarp) {
      const auto wb = block::load<Weights>(row, b);
#pragma unroll
      for (int t = 0; t < kTokensPerWarp; ++t)
        if (t < tokens) partial[t] += block::dot(wb, a[(t0 + t) * blocks_per_row + b]);
    }
#pragma unroll
    for (int t = 0; t < kTokensPerWarp; ++t) {
      float sum = partial[t];
      for (int offset = kWarp / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
      if (lane == 0 && t < tokens) {
        float& out = y[(t0 + t) * m + r];
        out = sum + out;
      }
    }
  }
}

}  // namespace

void launch_quantize_activations(const float* x, int64_t n, int64_t k, DType activations, void* a,
                                 cudaStream_t stream) {
  const auto quantize = [&](auto blk) {
    using Activations = decltype(blk);
    const int64_t count = n * (k / Activations::kWeights);
    launch_elementwise(count, QuantizeBlock<Activations>{x, static_cast<Activations*>(a)}, stream);
  };
  switch (activations) {
    case DType::Q8_0: quantize(BlockQ8_0{}); return;
    case DType::Q8_1: quantize(BlockQ8_1{}); return;
    case DType::Q8_K: quantize(BlockQ8_K{}); return;
    default: fail_unsupported_dtype("quantized matmul (activations)", activations);
  }
}

void launch_quantized_matmul(const void* w, DType weights, const void* a, int64_t n, int64_t k, int64_t m,
                             float* y, cudaStream_t stream) {
  if (n == 0 || m == 0 || k == 0) return;
  with_weight_blocks(weights, [&](auto wb, auto ab) {
    using Weights = decltype(wb);
    using Activations = decltype(ab);
    const dim3 grid(
        static_cast<unsigned>((m + kRowsPerBlock - 1) / kRowsPerBlock),
        static_cast<unsigned>(std::min((n + kTokensPerWarp - 1) / kTokensPerWarp, kMaxTokenTiles)));
    quantized_matmul_kernel<Weights, Activations><<<grid, kRowsPerBlock * kWarp, 0, stream>>>(
        static_cast<const unsigned char*>(w), dtype_row_bytes(weights, k), static_cast<const Activations*>(a),
        k / Weights::kWeights, n, m, y);
  });
  TM_CUDA_CHECK_LAUNCH();
}

void launch_dequantize_rows(const void* table, DType dtype, const int32_t* ids, int64_t n, int64_t d,
                            float* out, cudaStream_t stream) {
  with_block(dtype, [&](auto wb) {
    using Weights = decltype(wb);
    const int64_t blocks_per_row = d / Weights::kWeights;
    launch_elementwise(n * blocks_per_row,
                       DequantizeBlock<Weights>{static_cast<const unsigned char*>(table),
                                                dtype_row_bytes(dtype, d), ids, blocks_per_row, out},
                       stream);
  });
}

}  // namespace tokenmill::cuda
