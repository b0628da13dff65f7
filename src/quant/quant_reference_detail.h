// Internal to the scalar reference implementation: the weight quantisers of ggml's block
// formats (quantize_row_*_ref), which quant_reference.cpp dispatches to. Everything the
// quantisers share with decoding (block access, levels, rounding) is in quant_block_math.h.
//
// Every function takes `nb` whole blocks; the caller (quant_reference.cpp) has checked k.
// Floating point: as quant_block_math.h (one f32 operation at a time, never fused).
#pragma once

#include <cstdint>

#include "quant/quant_block_math.h"

namespace tokenmill::quant::detail {

// 32-weight formats (quant_legacy.cpp); Q8_0 weights use the activation quantiser.
void quantize_q4_0(const float* src, void* dst, int64_t nb);
void quantize_q4_1(const float* src, void* dst, int64_t nb);
void quantize_q5_0(const float* src, void* dst, int64_t nb);
void quantize_q5_1(const float* src, void* dst, int64_t nb);
void quantize_mxfp4(const float* src, void* dst, int64_t nb);

// 256-weight k-quants (quant_kquants_quantize.cpp).
void quantize_q4_k(const float* src, void* dst, int64_t nb);
void quantize_q5_k(const float* src, void* dst, int64_t nb);
void quantize_q6_k(const float* src, void* dst, int64_t nb);

}  // namespace tokenmill::quant::detail
