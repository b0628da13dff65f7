// Scalar reference implementations of the quantized formats: the definition of what
// every SIMD kernel (backend/cpu) must compute, and the quantisers behind
// `tokenmill quantize`.
//
// All functions take whole rows: k is a multiple of the type's block size (Error
// otherwise), `src`/`dst` quantized buffers hold k / block blocks and may be unaligned.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tokenmill::quant {

// dst[0, k) = the weights of a row of `type` (any DType, plain types included), exactly:
// every product is formed in f32 in the order ggml's dequantisers use, so the result is
// bit-identical to ggml's (and to gguf-py's numpy dequantisers).
void dequantize_row(DType type, const void* src, float* dst, int64_t k);

// Quantizes a row of f32 to `type` with ggml's reference algorithm for that type
// (quantize_row_*_ref: round to nearest, scales as ggml picks them), so our files
// match llama.cpp's for the same input. Every DType is accepted (plain types convert).
void quantize_row(DType type, const float* src, void* dst, int64_t k);

// sum_j w[j] * a[j] for a weight row of `weight_type` and an activation row already
// quantized to activation_type(weight_type): integer products per block, scaled per
// block in f32 and summed over blocks in order (ggml's generic vec_dot arithmetic).
// Plain weight types take f32 activations and accumulate in f32 in index order.
float vec_dot_row(DType weight_type, const void* w, const void* a, int64_t k);

}  // namespace tokenmill::quant
