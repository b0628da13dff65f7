// Element types and scalar conversions between f32, bf16 and f16.
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

enum class DType : uint8_t { F32, BF16, F16 };

constexpr size_t dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }
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

// Reads element i of a buffer of `dtype` as float. The buffer may be unaligned (tensors
// in a mapped file sit at any byte offset), so the element is copied, not dereferenced.
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

// Writes `value` as element i of a buffer of `dtype` (rounding to nearest even).
inline void store_from_f32(void* data, DType dtype, size_t i, float value) {
  switch (dtype) {
    case DType::F32: static_cast<float*>(data)[i] = value; break;
    case DType::BF16: static_cast<uint16_t*>(data)[i] = f32_to_bf16(value); break;
    case DType::F16: static_cast<uint16_t*>(data)[i] = f32_to_f16(value); break;
  }
}

}  // namespace tokenmill
