// ggml's 256-weight "k-quants": decoding of Q4_K, Q5_K, Q6_K and Q8_K, the Q8_K activation
// quantiser (quantize_row_q8_K_ref) and the k-quant · Q8_K dot products. The weight
// quantisers are in quant_kquants_quantize.cpp.
//
// Bit positions, weight n = 0..255 of a super-block (all f32 arithmetic, d/dmin from f16):
//
// Q4_K  8 sub-blocks of 32; sub-block s = n / 32 has a 6-bit scale sc[s] and 6-bit min mn[s]
//       packed in scales[12] (detail::scale_min_k4). The 4-bit level of weight n = 64g + l
//       (g = 0..3, l = 0..63) is the low nibble of qs[32g + l] for l < 32 and the high
//       nibble of qs[32g + l - 32] otherwise (sub-block 2g in low nibbles, 2g + 1 in high).
//         w = (d * sc[s]) * q - (dmin * mn[s])
// Q5_K  as Q4_K, plus bit 4 of the level of weight n = 32s + l (l = 0..31) is bit s of qh[l].
//         w = (d * sc[s]) * q - (dmin * mn[s]),  q in [0, 32)
// Q6_K  16 sub-blocks of 16 with int8 scales[n / 16]. In half h = n / 128, with
//       r = n % 128 = 32c + l (c = 0..3, l = 0..31), the 6-bit level is
//         low 4 bits:  c = 0: low nibble of ql[64h + l]       c = 1: low nibble of ql[64h + 32 + l]
//                      c = 2: high nibble of ql[64h + l]      c = 3: high nibble of ql[64h + 32 + l]
//         high 2 bits: bits 2c, 2c + 1 of qh[32h + l]
//         w = (d * scales[n / 16]) * (q - 32)
// Q8_K  w = d * qs[n], d an f32; bsums[i] = sum of qs over weights 16i .. 16i + 15.
#include <cmath>
#include <cstdint>

#include "quant/quant_reference_detail.h"

namespace tokenmill::quant::detail {

namespace {

constexpr int kSub32 = kBlock256 / 32;  // Q4_K / Q5_K sub-blocks
constexpr int kSub16 = kBlock256 / 16;  // Q6_K sub-blocks and Q8_K bsums

// The level of weight n of a Q4_K block (0..15).
inline int q4_k_level(const BlockQ4_K& b, int n) {
  const int g = n / 64, l = n % 64;
  return l < 32 ? b.qs[32 * g + l] & 0x0F : b.qs[32 * g + l - 32] >> 4;
}

// The level of weight n of a Q5_K block (0..31).
inline int q5_k_level(const BlockQ5_K& b, int n) {
  const int g = n / 64, l = n % 64;
  const int low = l < 32 ? b.qs[32 * g + l] & 0x0F : b.qs[32 * g + l - 32] >> 4;
  const int s = n / 32;
  return low | (((b.qh[n % 32] >> s) & 1) << 4);
}

// The signed level of weight n of a Q6_K block (q - 32, in [-32, 32)).
inline int q6_k_value(const BlockQ6_K& b, int n) {
  const int h = n / 128, c = (n % 128) / 32, l = n % 32;
  const uint8_t ql = b.ql[64 * h + 32 * (c & 1) + l];
  const int low = c < 2 ? ql & 0x0F : ql >> 4;
  const int high = (b.qh[32 * h + l] >> (2 * c)) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace

// ---- dequantisers --------------------------------------------------------------------

void dequantize_q4_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kBlock256) {
    const auto b = load_block<BlockQ4_K>(src, i);
    const float d = fp16(b.d), dmin = fp16(b.dmin);
    for (int s = 0; s < kSub32; ++s) {
      const ScaleMin sm = scale_min_k4(b.scales, s);
      const float ds = d * static_cast<float>(sm.scale), ms = dmin * static_cast<float>(sm.min);
      for (int n = 32 * s; n < 32 * s + 32; ++n) dst[n] = ds * static_cast<float>(q4_k_level(b, n)) - ms;
    }
  }
}

void dequantize_q5_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kBlock256) {
    const auto b = load_block<BlockQ5_K>(src, i);
    const float d = fp16(b.d), dmin = fp16(b.dmin);
    for (int s = 0; s < kSub32; ++s) {
      const ScaleMin sm = scale_min_k4(b.scales, s);
      const float ds = d * static_cast<float>(sm.scale), ms = dmin * static_cast<float>(sm.min);
      for (int n = 32 * s; n < 32 * s + 32; ++n) dst[n] = ds * static_cast<float>(q5_k_level(b, n)) - ms;
    }
  }
}

void dequantize_q6_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kBlock256) {
    const auto b = load_block<BlockQ6_K>(src, i);
    const float d = fp16(b.d);
    for (int n = 0; n < kBlock256; ++n)
      dst[n] = d * static_cast<float>(b.scales[n / 16]) * static_cast<float>(q6_k_value(b, n));
  }
}

void dequantize_q8_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kBlock256) {
    const auto b = load_block<BlockQ8_K>(src, i);
    for (int n = 0; n < kBlock256; ++n) dst[n] = b.d * static_cast<float>(b.qs[n]);
  }
}

// ---- Q8_K quantiser -------------------------------------------------------------------
// iscale = -127 / max (max: the value of largest magnitude, the first on ties);
// q = min(127, nearest_int(iscale * x)); d = 1 / iscale (an f32, not rounded to f16).
// A block of zeros is all zero (ggml leaves its bsums unwritten; we write zeros).
void quantize_q8_k(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kBlock256) {
    float amax = 0.0f, max = 0.0f;
    for (int n = 0; n < kBlock256; ++n) {
      if (std::fabs(src[n]) > amax) {
        amax = std::fabs(src[n]);
        max = src[n];
      }
    }
    BlockQ8_K b{};
    if (amax != 0.0f) {
      const float iscale = -127.0f / max;
      for (int n = 0; n < kBlock256; ++n) {
        const int q = nearest_int(iscale * src[n]);
        b.qs[n] = static_cast<int8_t>(q < 127 ? q : 127);
      }
      for (int s = 0; s < kSub16; ++s) {
        int sum = 0;
        for (int n = 16 * s; n < 16 * s + 16; ++n) sum += b.qs[n];
        b.bsums[s] = static_cast<int16_t>(sum);
      }
      b.d = 1 / iscale;
    }
    store_block(dst, i, b);
  }
}

// ---- dot products with Q8_K -----------------------------------------------------------
// Per super-block, with exact int32 sums:
//   isum = sum over sub-blocks s of scale[s] * sum_{n in s} q_w[n] * q_a[n]
//   msum = sum over the 16 bsums of bsums[i] * min[i / 2]      (Q4_K, Q5_K only)
//   total += (f16(d) * a.d) * isum - (f16(dmin) * a.d) * msum   in f32, block by block.
// ggml's generic code forms the same integer sums but spreads isum over 8 f32 lanes that
// are added after the last block, so its last bits may differ from ours; the integer
// part, where all the exactness lives, is identical.

float vec_dot_q4_k_q8_k(const void* w, const void* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    const auto x = load_block<BlockQ4_K>(w, i);
    const auto y = load_block<BlockQ8_K>(a, i);
    int32_t isum = 0, msum = 0;
    for (int s = 0; s < kSub32; ++s) {
      const ScaleMin sm = scale_min_k4(x.scales, s);
      int32_t sub = 0;
      for (int n = 32 * s; n < 32 * s + 32; ++n) sub += q4_k_level(x, n) * y.qs[n];
      isum += sm.scale * sub;
    }
    for (int j = 0; j < kSub16; ++j) msum += y.bsums[j] * scale_min_k4(x.scales, j / 2).min;
    const float d = fp16(x.d) * y.d, dmin = fp16(x.dmin) * y.d;
    sum += d * static_cast<float>(isum) - dmin * static_cast<float>(msum);
  }
  return sum;
}

float vec_dot_q5_k_q8_k(const void* w, const void* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    const auto x = load_block<BlockQ5_K>(w, i);
    const auto y = load_block<BlockQ8_K>(a, i);
    int32_t isum = 0, msum = 0;
    for (int s = 0; s < kSub32; ++s) {
      const ScaleMin sm = scale_min_k4(x.scales, s);
      int32_t sub = 0;
      for (int n = 32 * s; n < 32 * s + 32; ++n) sub += q5_k_level(x, n) * y.qs[n];
      isum += sm.scale * sub;
    }
    for (int j = 0; j < kSub16; ++j) msum += y.bsums[j] * scale_min_k4(x.scales, j / 2).min;
    const float d = fp16(x.d) * y.d, dmin = fp16(x.dmin) * y.d;
    sum += d * static_cast<float>(isum) - dmin * static_cast<float>(msum);
  }
  return sum;
}

float vec_dot_q6_k_q8_k(const void* w, const void* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    const auto x = load_block<BlockQ6_K>(w, i);
    const auto y = load_block<BlockQ8_K>(a, i);
    int32_t isum = 0;
    for (int s = 0; s < kSub16; ++s) {
      int32_t sub = 0;
      for (int n = 16 * s; n < 16 * s + 16; ++n) sub += q6_k_value(x, n) * y.qs[n];
      isum += x.scales[s] * sub;
    }
    sum += fp16(x.d) * y.d * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace tokenmill::quant::detail
