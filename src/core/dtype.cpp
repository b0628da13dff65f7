#include "core/dtype.h"

namespace tokenmill {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::Q4_0: return "q4_0";
    case DType::Q4_1: return "q4_1";
    case DType::Q5_0: return "q5_0";
    case DType::Q5_1: return "q5_1";
    case DType::Q8_0: return "q8_0";
    case DType::MXFP4: return "mxfp4";
    case DType::Q4_K: return "q4_k";
    case DType::Q5_K: return "q5_k";
    case DType::Q6_K: return "q6_k";
    case DType::Q8_1: return "q8_1";
    case DType::Q8_K: return "q8_k";
  }
  return "?";
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return bits_to_f32(sign | 0x7f800000u | (mantissa << 13));  // inf/NaN
  if (exponent != 0) return bits_to_f32(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return bits_to_f32(sign);  // signed zero
  // Subnormal: value = mantissa * 2^-24; normalise it into an f32.
  uint32_t shift = 0;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    ++shift;
  }
  mantissa &= 0x3ffu;
  return bits_to_f32(sign | ((113u - shift) << 23) | (mantissa << 13));
}

uint16_t f32_to_f16(float f) {
  const uint32_t bits = f32_to_bits(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs >= 0x38800000u) {                                              // normal in f16 (>= 2^-14)
    // Re-bias the exponent and round the 13 dropped mantissa bits to nearest even.
    uint32_t v = abs - (112u << 23);
    v += 0xfffu + ((v >> 13) & 1u);
    return static_cast<uint16_t>(sign | (v >> 13));
  }
  if (abs < 0x33000000u) return sign;  // below half the smallest subnormal: zero
  // Subnormal in f16: value / 2^-24, rounded to nearest even.
  const uint32_t exponent = abs >> 23;
  const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exponent;  // 14..24
  uint32_t v = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (v & 1u))) ++v;
  return static_cast<uint16_t>(sign | v);
}

}  // namespace tokenmill
