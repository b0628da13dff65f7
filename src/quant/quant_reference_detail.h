// Internal to the scalar reference implementation (quant_reference.cpp dispatches to the
// per-format functions declared here): unaligned block access, ggml's rounding helper and
// the k-quants' 6-bit scale unpacking.
//
// Every function takes `nb` whole blocks; the caller (quant_reference.cpp) has checked k.
//
// Floating point contract: every product and sum is one f32 operation in the order ggml
// writes it, never fused: the quant sources are compiled with -ffp-contract=off (see
// src/quant/CMakeLists.txt; clang would otherwise contract a*b+c into an FMA under
// -march=x86-64-v3) and use no std::fma.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "quant/quant_formats.h"

namespace tokenmill::quant::detail {

// Block i of a row that may sit at any byte offset.
template <class Block>
Block load_block(const void* row, int64_t i) {
  Block b;
  std::memcpy(&b, static_cast<const unsigned char*>(row) + static_cast<size_t>(i) * sizeof(Block),
              sizeof(Block));
  return b;
}

template <class Block>
void store_block(void* row, int64_t i, const Block& b) {
  std::memcpy(static_cast<unsigned char*>(row) + static_cast<size_t>(i) * sizeof(Block), &b, sizeof(Block));
}

inline float fp16(uint16_t h) { return f16_to_f32(h); }

// ggml's nearest_int: adding 1.5 * 2^23 leaves round-to-nearest-even(f) in the low mantissa
// bits. Exact for |f| <= 2^22 - 1; outside that range ggml's result is garbage and so is
// ours, bit for bit (the k-quant quantisers clamp it afterwards).
inline int nearest_int(float f) {
  const float shifted = f + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block, packed in 12 bytes:
//   j < 4:  scale = bits 0-5 of scales[j],            min = bits 0-5 of scales[j + 4]
//   j >= 4: scale = bits 0-3 of scales[j + 4]          min = bits 4-7 of scales[j + 4]
//                   | (bits 6-7 of scales[j - 4]) << 4       | (bits 6-7 of scales[j]) << 4
struct ScaleMin {
  uint8_t scale, min;
};
inline ScaleMin scale_min_k4(const uint8_t* scales, int j) {
  if (j < 4) return {static_cast<uint8_t>(scales[j] & 63), static_cast<uint8_t>(scales[j + 4] & 63)};
  return {static_cast<uint8_t>((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4)),
          static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4))};
}

// 32-weight formats (quant_legacy.cpp).
void dequantize_q4_0(const void* src, float* dst, int64_t nb);
void dequantize_q4_1(const void* src, float* dst, int64_t nb);
void dequantize_q5_0(const void* src, float* dst, int64_t nb);
void dequantize_q5_1(const void* src, float* dst, int64_t nb);
void dequantize_q8_0(const void* src, float* dst, int64_t nb);
void dequantize_q8_1(const void* src, float* dst, int64_t nb);
void quantize_q4_0(const float* src, void* dst, int64_t nb);
void quantize_q4_1(const float* src, void* dst, int64_t nb);
void quantize_q5_0(const float* src, void* dst, int64_t nb);
void quantize_q5_1(const float* src, void* dst, int64_t nb);
void quantize_q8_0(const float* src, void* dst, int64_t nb);
void quantize_q8_1(const float* src, void* dst, int64_t nb);
float vec_dot_q4_0_q8_0(const void* w, const void* a, int64_t nb);
float vec_dot_q4_1_q8_1(const void* w, const void* a, int64_t nb);
float vec_dot_q5_0_q8_0(const void* w, const void* a, int64_t nb);
float vec_dot_q5_1_q8_1(const void* w, const void* a, int64_t nb);
float vec_dot_q8_0_q8_0(const void* w, const void* a, int64_t nb);

// 256-weight k-quants: decoding, Q8_K and the dot products (quant_kquants.cpp) ...
void dequantize_q4_k(const void* src, float* dst, int64_t nb);
void dequantize_q5_k(const void* src, float* dst, int64_t nb);
void dequantize_q6_k(const void* src, float* dst, int64_t nb);
void dequantize_q8_k(const void* src, float* dst, int64_t nb);
void quantize_q8_k(const float* src, void* dst, int64_t nb);
float vec_dot_q4_k_q8_k(const void* w, const void* a, int64_t nb);
float vec_dot_q5_k_q8_k(const void* w, const void* a, int64_t nb);
float vec_dot_q6_k_q8_k(const void* w, const void* a, int64_t nb);

// ... and their weight quantisers (quant_kquants_quantize.cpp).
void quantize_q4_k(const float* src, void* dst, int64_t nb);
void quantize_q5_k(const float* src, void* dst, int64_t nb);
void quantize_q6_k(const float* src, void* dst, int64_t nb);

}  // namespace tokenmill::quant::detail
