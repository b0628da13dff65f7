// Element types and scalar conversions between f32, bf16 and f16.
//
// Besides the plain types, a DType may be one of ggml's block-quantized formats
// (quant/quant_formats.h has their layouts): `dtype_block_size` weights are stored in
// `dtype_block_bytes` bytes, so such a tensor's last dimension is a multiple of the block
// size and its size is counted in rows (`dtype_row_bytes`), never per element.
//
// The conversions are plain bit manipulation (no intrinsics) so they are usable from
// any translation unit and, later, from device code; SIMD kernels have their own
// vectorised versions and are tested against these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace tokenmill {

enum class DType : uint8_t {
  F32,
  BF16,
  F16,
  // ggml block formats (weights): 32 weights per block ...
  Q4_0,
  Q4_1,
  Q5_0,
  Q5_1,
  Q8_0,
  MXFP4,  // OCP microscaling FP4 (E2M1 values, an e8m0 power-of-two scale per block)
  // ... 256 weights per block ("k-quants").
  Q4_K,
  Q5_K,
  Q6_K,
  // ggml's activation formats: a row of f32 activations quantized for integer dot
  // products with Q4_1/Q5_1 (Q8_1) and with the k-quants (Q8_K).
  Q8_1,
  Q8_K,
};

constexpr bool is_quantized(DType t) { return t != DType::F32 && t != DType::BF16 && t != DType::F16; }

// Weights per block: 1 for the plain types.
constexpr int64_t dtype_block_size(DType t) {
  switch (t) {
    case DType::F32:
    case DType::BF16:
    case DType::F16: return 1;
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::Q8_K: return 256;
    default: return 32;
  }
}

// Bytes per block (the element size for the plain types).
constexpr size_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::BF16:
    case DType::F16: return 2;
    case DType::Q4_0: return 18;
    case DType::Q4_1: return 20;
    case DType::Q5_0: return 22;
    case DType::Q5_1: return 24;
    case DType::Q8_0: return 34;
    case DType::MXFP4: return 17;
    case DType::Q8_1: return 36;
    case DType::Q4_K: return 144;
    case DType::Q5_K: return 176;
    case DType::Q6_K: return 210;
    case DType::Q8_K: return 292;
  }
  return 0;
}

// Element size of a plain type. Quantized types have no per-element size: use
// dtype_row_bytes.
constexpr size_t dtype_size(DType t) { return is_quantized(t) ? 0 : dtype_block_bytes(t); }

// Bytes of a row of `cols` elements; `cols` must be a multiple of dtype_block_size(t)
// (Tensor checks this where a view is made).
constexpr size_t dtype_row_bytes(DType t, int64_t cols) {
  return static_cast<size_t>(cols / dtype_block_size(t)) * dtype_block_bytes(t);
}

std::string_view dtype_name(DType t);

inline float bits_to_f32(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint32_t f32_to_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

// bf16 is the top half of an IEEE f32.
inline float bf16_to_f32(uint16_t h) { return bits_to_f32(static_cast<uint32_t>(h) << 16); }

// Round to nearest, ties to even; NaN stays a (quiet) NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits = f32_to_bits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// IEEE 754 binary16 -> binary32, exact (subnormals, infinities and NaN included).
float f16_to_f32(uint16_t h);
// binary32 -> binary16, round to nearest even; overflow gives infinity.
uint16_t f32_to_f16(float f);

// Reads element i of a buffer of plain `dtype` (f32, bf16, f16) as float. The buffer may be unaligned
// (tensors in a mapped file sit at any byte offset), so the element is copied, not dereferenced.
inline float load_as_f32(const void* data, DType dtype, size_t i) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  if (dtype == DType::F32) {
    float f;
    std::memcpy(&f, bytes + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, bytes + 2 * i, 2);
  return dtype == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

// Writes `value` as element i of a buffer of plain `dtype` (rounding to nearest even); the
// buffer may be unaligned, as for load_as_f32.
inline void store_from_f32(void* data, DType dtype, size_t i, float value) {
  auto* bytes = static_cast<unsigned char*>(data);
  if (dtype == DType::F32) {
    std::memcpy(bytes + 4 * i, &value, 4);
  } else {
    const uint16_t h = dtype == DType::BF16 ? f32_to_bf16(value) : f32_to_f16(value);
    std::memcpy(bytes + 2 * i, &h, 2);
  }
}

}  // namespace tokenmill
