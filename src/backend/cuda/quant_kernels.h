// Launchers of the kernels over ggml-quantized weights (quant_kernels.cu), queued on
// `stream`: the CUDA side of Backend::matmul and Backend::embedding for Q4_0 ... Q6_K and
// MXFP4. They run the per-block arithmetic of quant/quant_block_math.h, the functions the CPU
// reference runs, so the integer block sums are the reference's and only the order of the f32
// sums over blocks differs. Weights may sit at any byte offset; nothing here checks shapes
// (cuda_linear_ops.cpp does, with the CPU backend's checks).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace tokenmill::cuda {

// a = x [n, k] quantized row by row to `activations` (Q8_0, Q8_1 or Q8_K, ggml's reference
// quantisers): n * k / block blocks, a row's blocks contiguous; a is aligned device memory.
void launch_quantize_activations(const float* x, int64_t n, int64_t k, DType activations, void* a,
                                 cudaStream_t stream);

// y[t, r] += dot(w row r, a row t) for t < n, r < m: w [m, k] of weight type `weights`, a from
// launch_quantize_activations with quant::activation_type(weights). A warp computes one
// (r, t) output from fixed lane shares of the blocks and a fixed reduction tree, so a token's
// outputs are the same bits in any batch.
void launch_quantized_matmul(const void* w, DType weights, const void* a, int64_t n, int64_t k, int64_t m,
                             float* y, cudaStream_t stream);

// out[t, :] = the dequantized row ids[t] of table [vocab, d] of quantized `dtype`, exactly
// (quant::dequantize_row's bits); ids [n] in range.
void launch_dequantize_rows(const void* table, DType dtype, const int32_t* ids, int64_t n, int64_t d,
                            float* out, cudaStream_t stream);

}  // namespace tokenmill::cuda
