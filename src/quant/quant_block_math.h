// The arithmetic of one block of each ggml format: weight j of a block, the f32 term a block
// adds to a dot product, and the activation quantisers (Q8_0, Q8_1, Q8_K). The scalar
// reference (quant_reference.cpp) runs it over rows, and the CUDA kernels
// (backend/cuda/quant_kernels.cu) run the same functions per block: TM_HOST_DEVICE makes them
// `__host__ __device__` under nvcc, so the two cannot drift apart.
//
// Floating point contract: every product and sum is one f32 operation in the order ggml
// writes it, never fused. Files that include this header are compiled with
// -ffp-contract=off (host; see src/quant/CMakeLists.txt) or -fmad=false (CUDA), and no
// std::fma is used.
//
// Bit positions (formats: quant_formats.h). Weight j = 0..31 of a 32-weight block:
//   4- and 5-bit formats: the low 4 bits of weight j are the low nibble of qs[j] for j < 16
//     and the high nibble of qs[j - 16] for j >= 16 (weights j and j + 16 share a byte);
//     5-bit formats: bit 4 of weight j is bit j of qh read as a little-endian u32.
//   Q8_0, Q8_1: weight j is qs[j] as int8.
//   MXFP4: the nibble q of weight j is placed as in the 4-bit formats; its value is
//     mxfp4_value(q) * e8m0_half(e).
// Weight n = 0..255 of a 256-weight k-quant super-block:
//   Q4_K  8 sub-blocks of 32; sub-block s = n / 32 has a 6-bit scale sc[s] and 6-bit min
//         mn[s] packed in scales[12] (scale_min_k4). The 4-bit level of weight n = 64g + l
//         (g = 0..3, l = 0..63) is the low nibble of qs[32g + l] for l < 32 and the high
//         nibble of qs[32g + l - 32] otherwise (sub-block 2g in low nibbles, 2g + 1 in high).
//   Q5_K  as Q4_K, plus bit 4 of the level of weight n = 32s + l (l = 0..31) is bit s of qh[l].
//   Q6_K  16 sub-blocks of 16 with int8 scales[n / 16]. In half h = n / 128, with
//         r = n % 128 = 32c + l (c = 0..3, l = 0..31), the 6-bit level is
//           low 4 bits:  c = 0: low nibble of ql[64h + l]     c = 1: low nibble of ql[64h + 32 + l]
//                        c = 2: high nibble of ql[64h + l]    c = 3: high nibble of ql[64h + 32 + l]
//           high 2 bits: bits 2c, 2c + 1 of qh[32h + l]
//   Q8_K  qs[n] as int8, d an f32; bsums[i] = sum of qs over weights 16i .. 16i + 15.
#pragma once

#include <math.h>

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#include <cuda_fp16.h>
#endif

#include "core/dtype.h"
#include "core/host_device.h"
#include "quant/quant_formats.h"

namespace tokenmill::quant::block {

// ---- access ---------------------------------------------------------------------------

// Block i of a row that may sit at any byte offset (a tensor in a mapped file, or a device
// buffer placed anywhere): copied, never dereferenced in place.
template <class Block>
TM_HOST_DEVICE Block load(const void* row, int64_t i) {
  Block b;
  std::memcpy(&b, static_cast<const unsigned char*>(row) + static_cast<size_t>(i) * sizeof(Block),
              sizeof(Block));
  return b;
}

template <class Block>
TM_HOST_DEVICE void store(void* row, int64_t i, const Block& b) {
  std::memcpy(static_cast<unsigned char*>(row) + static_cast<size_t>(i) * sizeof(Block), &b, sizeof(Block));
}

// binary16 bits -> f32, exact; f32 -> binary16 bits, round to nearest even (overflow: inf).
TM_HOST_DEVICE float fp16(uint16_t h) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(h));
#else
  return f16_to_f32(h);
#endif
}
TM_HOST_DEVICE uint16_t to_fp16(float f) {
#ifdef __CUDA_ARCH__
  return __half_as_ushort(__float2half_rn(f));
#else
  return f32_to_f16(f);
#endif
}

// ggml's nearest_int: adding 1.5 * 2^23 leaves round-to-nearest-even(f) in the low mantissa
// bits. Exact for |f| <= 2^22 - 1; outside that range ggml's result is garbage and so is
// ours, bit for bit (the k-quant quantisers clamp it afterwards).
TM_HOST_DEVICE int nearest_int(float f) {
  const float shifted = f + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

// ---- levels ---------------------------------------------------------------------------

inline constexpr int kHalf32 = kBlock32 / 2;
inline constexpr int kSub32 = kBlock256 / 32;  // Q4_K / Q5_K sub-blocks
inline constexpr int kSub16 = kBlock256 / 16;  // Q6_K sub-blocks and Q8_K bsums

// The low 4 bits of weight j (0..31) of a 32-weight block.
TM_HOST_DEVICE int low_bits(const uint8_t* qs, int j) {
  return j < kHalf32 ? qs[j] & 0x0F : qs[j - kHalf32] >> 4;
}

// Bit 4 of weight j of a 5-bit block, as 0 or 16.
TM_HOST_DEVICE int high_bit(const uint8_t* qh_bytes, int j) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof qh);
  return static_cast<int>((qh >> j) & 1u) << 4;
}

// ggml's kvalues_mxfp4[q]: twice the FP4 E2M1 value of nibble q = s e1 e0 m (sign, 2-bit
// exponent, 1-bit mantissa), an integer: q & 7 = 0..7 gives 0 1 2 3 4 6 8 12 (packed below as
// nibbles), and bit 3 negates it (q = 8 is -0, i.e. 0).
TM_HOST_DEVICE int mxfp4_value(int q) {
  const int magnitude = static_cast<int>((0xC8643210u >> (4 * (q & 7))) & 0xFu);
  return (q & 8) != 0 ? -magnitude : magnitude;
}

// ggml's GGML_E8M0_TO_FP32_HALF: 2^(e - 128), the e8m0 scale 2^(e - 127) halved to undo the
// doubling of mxfp4_value, exactly. e = 0 and 1 give the f32 subnormals 2^-128 and 2^-127;
// e = 255 (NaN in e8m0) is not special-cased and gives 2^127, as in ggml.
TM_HOST_DEVICE float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block, packed in 12 bytes:
//   j < 4:  scale = bits 0-5 of scales[j],            min = bits 0-5 of scales[j + 4]
//   j >= 4: scale = bits 0-3 of scales[j + 4]          min = bits 4-7 of scales[j + 4]
//                   | (bits 6-7 of scales[j - 4]) << 4       | (bits 6-7 of scales[j]) << 4
struct ScaleMin {
  uint8_t scale, min;
};
TM_HOST_DEVICE ScaleMin scale_min_k4(const uint8_t* scales, int j) {
  if (j < 4) return {static_cast<uint8_t>(scales[j] & 63), static_cast<uint8_t>(scales[j + 4] & 63)};
  return {static_cast<uint8_t>((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4)),
          static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4))};
}

// The level of weight n of a Q4_K block (0..15).
TM_HOST_DEVICE int q4_k_level(const BlockQ4_K& b, int n) {
  const int g = n / 64, l = n % 64;
  return l < 32 ? b.qs[32 * g + l] & 0x0F : b.qs[32 * g + l - 32] >> 4;
}

// The level of weight n of a Q5_K block (0..31).
TM_HOST_DEVICE int q5_k_level(const BlockQ5_K& b, int n) {
  const int g = n / 64, l = n % 64;
  const int low = l < 32 ? b.qs[32 * g + l] & 0x0F : b.qs[32 * g + l - 32] >> 4;
  return low | (((b.qh[n % 32] >> (n / 32)) & 1) << 4);
}

// The signed level of weight n of a Q6_K block (q - 32, in [-32, 32)).
TM_HOST_DEVICE int q6_k_value(const BlockQ6_K& b, int n) {
  const int h = n / 128, c = (n % 128) / 32, l = n % 32;
  const uint8_t ql = b.ql[64 * h + 32 * (c & 1) + l];
  const int low = c < 2 ? ql & 0x0F : ql >> 4;
  const int high = (b.qh[32 * h + l] >> (2 * c)) & 3;
  return (low | (high << 4)) - 32;
}

// ---- weight j of a block (f32, ggml's dequantisers' arithmetic) --------------------------

TM_HOST_DEVICE float weight(const BlockQ4_0& b, int j) {
  return static_cast<float>(low_bits(b.qs, j) - 8) * fp16(b.d);
}
TM_HOST_DEVICE float weight(const BlockQ4_1& b, int j) {
  return static_cast<float>(low_bits(b.qs, j)) * fp16(b.d) + fp16(b.m);
}
TM_HOST_DEVICE float weight(const BlockQ5_0& b, int j) {
  return static_cast<float>((low_bits(b.qs, j) | high_bit(b.qh, j)) - 16) * fp16(b.d);
}
TM_HOST_DEVICE float weight(const BlockQ5_1& b, int j) {
  return static_cast<float>(low_bits(b.qs, j) | high_bit(b.qh, j)) * fp16(b.d) + fp16(b.m);
}
TM_HOST_DEVICE float weight(const BlockQ8_0& b, int j) { return static_cast<float>(b.qs[j]) * fp16(b.d); }
TM_HOST_DEVICE float weight(const BlockQ8_1& b, int j) { return static_cast<float>(b.qs[j]) * fp16(b.d); }
TM_HOST_DEVICE float weight(const BlockMXFP4& b, int j) {
  return static_cast<float>(mxfp4_value(low_bits(b.qs, j))) * e8m0_half(b.e);
}

// Q4_K / Q5_K: (d * sc[s]) * q - (dmin * mn[s]) for sub-block s = n / 32.
TM_HOST_DEVICE float k4_weight(uint16_t d, uint16_t dmin, const uint8_t* scales, int n, int level) {
  const ScaleMin sm = scale_min_k4(scales, n / 32);
  const float ds = fp16(d) * static_cast<float>(sm.scale), ms = fp16(dmin) * static_cast<float>(sm.min);
  return ds * static_cast<float>(level) - ms;
}
TM_HOST_DEVICE float weight(const BlockQ4_K& b, int n) {
  return k4_weight(b.d, b.dmin, b.scales, n, q4_k_level(b, n));
}
TM_HOST_DEVICE float weight(const BlockQ5_K& b, int n) {
  return k4_weight(b.d, b.dmin, b.scales, n, q5_k_level(b, n));
}
TM_HOST_DEVICE float weight(const BlockQ6_K& b, int n) {
  return fp16(b.d) * static_cast<float>(b.scales[n / 16]) * static_cast<float>(q6_k_value(b, n));
}
TM_HOST_DEVICE float weight(const BlockQ8_K& b, int n) { return b.d * static_cast<float>(b.qs[n]); }

// ---- a block's term of a dot product with its activation format -----------------------
// The exact integer sum of q_w * q_a over the block, then one f32 scaling in ggml's order of
// operations for that pair; a row's dot product adds these terms in f32, block by block.

TM_HOST_DEVICE float dot(const BlockQ4_0& x, const BlockQ8_0& y) {
  int sumi = 0;
  for (int j = 0; j < kBlock32; ++j) sumi += (low_bits(x.qs, j) - 8) * y.qs[j];
  return static_cast<float>(sumi) * fp16(x.d) * fp16(y.d);
}

// sum(w * a) = d_w d_a sum(q_w q_a) + m_w * (d_a sum(q_a)), the last factor being Q8_1's s.
TM_HOST_DEVICE float dot(const BlockQ4_1& x, const BlockQ8_1& y) {
  int sumi = 0;
  for (int j = 0; j < kBlock32; ++j) sumi += low_bits(x.qs, j) * y.qs[j];
  return fp16(x.d) * fp16(y.d) * static_cast<float>(sumi) + fp16(x.m) * fp16(y.s);
}

TM_HOST_DEVICE float dot(const BlockQ5_0& x, const BlockQ8_0& y) {
  int sumi = 0;
  for (int j = 0; j < kBlock32; ++j) sumi += ((low_bits(x.qs, j) | high_bit(x.qh, j)) - 16) * y.qs[j];
  return fp16(x.d) * fp16(y.d) * static_cast<float>(sumi);
}

TM_HOST_DEVICE float dot(const BlockQ5_1& x, const BlockQ8_1& y) {
  int sumi = 0;
  for (int j = 0; j < kBlock32; ++j) sumi += (low_bits(x.qs, j) | high_bit(x.qh, j)) * y.qs[j];
  return fp16(x.d) * fp16(y.d) * static_cast<float>(sumi) + fp16(x.m) * fp16(y.s);
}

TM_HOST_DEVICE float dot(const BlockQ8_0& x, const BlockQ8_0& y) {
  int sumi = 0;
  for (int j = 0; j < kBlock32; ++j) sumi += x.qs[j] * y.qs[j];
  return static_cast<float>(sumi) * (fp16(x.d) * fp16(y.d));
}

// ggml's order: (d_a * d_w) * sumi.
TM_HOST_DEVICE float dot(const BlockMXFP4& x, const BlockQ8_0& y) {
  int sumi = 0;
  for (int j = 0; j < kBlock32; ++j) sumi += mxfp4_value(low_bits(x.qs, j)) * y.qs[j];
  return fp16(y.d) * e8m0_half(x.e) * static_cast<float>(sumi);
}

// k-quants with Q8_K, exact int32 sums:
//   isum = sum over sub-blocks s of scale[s] * sum_{n in s} q_w[n] * q_a[n]
//   msum = sum over the 16 bsums of bsums[i] * min[i / 2]      (Q4_K, Q5_K only)
//   term = (f16(d) * a.d) * isum - (f16(dmin) * a.d) * msum
// ggml's generic code forms the same integer sums but spreads isum over 8 f32 lanes that
// are added after the last block, so its last bits may differ from ours; the integer
// part, where all the exactness lives, is identical.
template <class Block, int (*Level)(const Block&, int)>
TM_HOST_DEVICE float k4_dot(const Block& x, const BlockQ8_K& y) {
  int32_t isum = 0, msum = 0;
  for (int s = 0; s < kSub32; ++s) {
    int32_t sub = 0;
    for (int n = 32 * s; n < 32 * s + 32; ++n) sub += Level(x, n) * y.qs[n];
    isum += scale_min_k4(x.scales, s).scale * sub;
  }
  for (int j = 0; j < kSub16; ++j) msum += y.bsums[j] * scale_min_k4(x.scales, j / 2).min;
  const float d = fp16(x.d) * y.d, dmin = fp16(x.dmin) * y.d;
  return d * static_cast<float>(isum) - dmin * static_cast<float>(msum);
}
TM_HOST_DEVICE float dot(const BlockQ4_K& x, const BlockQ8_K& y) {
  return k4_dot<BlockQ4_K, q4_k_level>(x, y);
}
TM_HOST_DEVICE float dot(const BlockQ5_K& x, const BlockQ8_K& y) {
  return k4_dot<BlockQ5_K, q5_k_level>(x, y);
}

TM_HOST_DEVICE float dot(const BlockQ6_K& x, const BlockQ8_K& y) {
  int32_t isum = 0;
  for (int s = 0; s < kSub16; ++s) {
    int32_t sub = 0;
    for (int n = 16 * s; n < 16 * s + 16; ++n) sub += q6_k_value(x, n) * y.qs[n];
    isum += x.scales[s] * sub;
  }
  return fp16(x.d) * y.d * static_cast<float>(isum);
}

// ---- activation quantisers (ggml's quantize_row_q8_*_ref) -----------------------------

// Q8_0: d = absmax / 127; q = roundf(x / d) (half away from zero); a block of zeros gets
// d = 0. Returns sum(q) and the unrounded d through *d_out (Q8_1 needs both).
TM_HOST_DEVICE int quantize_q8_levels(const float* x, int8_t* qs, float* d_out) {
  float amax = 0.0f;
  for (int j = 0; j < kBlock32; ++j) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
  const float d = amax / 127;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int sum = 0;
  for (int j = 0; j < kBlock32; ++j) {
    qs[j] = static_cast<int8_t>(roundf(x[j] * id));
    sum += qs[j];
  }
  *d_out = d;
  return sum;
}

TM_HOST_DEVICE void quantize(const float* x, BlockQ8_0& b) {
  float d;
  quantize_q8_levels(x, b.qs, &d);
  b.d = to_fp16(d);
}

// As Q8_0, plus s = f16(sum(q) * d) with d the unrounded f32 scale.
TM_HOST_DEVICE void quantize(const float* x, BlockQ8_1& b) {
  float d;
  const int sum = quantize_q8_levels(x, b.qs, &d);
  b.d = to_fp16(d);
  b.s = to_fp16(static_cast<float>(sum) * d);
}

// Q8_K: iscale = -127 / max (max: the value of largest magnitude, the first on ties);
// q = min(127, nearest_int(iscale * x)); d = 1 / iscale (an f32, not rounded to f16).
// A block of zeros is all zero (ggml leaves its bsums unwritten; we write zeros).
TM_HOST_DEVICE void quantize(const float* x, BlockQ8_K& b) {
  float amax = 0.0f, max = 0.0f;
  for (int n = 0; n < kBlock256; ++n) {
    if (fabsf(x[n]) > amax) {
      amax = fabsf(x[n]);
      max = x[n];
    }
  }
  b = BlockQ8_K{};
  if (amax == 0.0f) return;
  const float iscale = -127.0f / max;
  for (int n = 0; n < kBlock256; ++n) {
    const int q = nearest_int(iscale * x[n]);
    b.qs[n] = static_cast<int8_t>(q < 127 ? q : 127);
  }
  for (int s = 0; s < kSub16; ++s) {
    int sum = 0;
    for (int n = 16 * s; n < 16 * s + 16; ++n) sum += b.qs[n];
    b.bsums[s] = static_cast<int16_t>(sum);
  }
  b.d = 1 / iscale;
}

}  // namespace tokenmill::quant::block
