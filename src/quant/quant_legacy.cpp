// ggml's 32-weight block formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (weights) and Q8_1
// (activations): dequantisers, reference quantisers (ggml's quantize_row_*_ref) and
// the integer dot products (ggml's ggml_vec_dot_*_generic).
//
// Bit positions, weight j = 0..31 of a block:
//   4- and 5-bit formats: the low 4 bits of weight j are the low nibble of qs[j] for
//     j < 16 and the high nibble of qs[j - 16] for j >= 16 (weights j and j + 16 share a
//     byte); 5-bit formats: bit 4 of weight j is bit j of qh read as a little-endian u32.
//   Q8_0, Q8_1: weight j is qs[j] as int8.
// Values, all f32 arithmetic, d/m/s read from f16:
//   Q4_0  w = (q - 8) * d        Q4_1  w = q * d + m
//   Q5_0  w = (q - 16) * d       Q5_1  w = q * d + m
//   Q8_0  w = q * d              Q8_1  w = q * d, s = f16(d * sum(q)) (for the Q4_1/Q5_1 min term)
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant/quant_reference_detail.h"

namespace tokenmill::quant::detail {

namespace {

constexpr int kHalf = kBlock32 / 2;

// The low 4 bits of weight j (0..31).
inline int low_bits(const uint8_t* qs, int j) { return j < kHalf ? qs[j] & 0x0F : qs[j - kHalf] >> 4; }

// Bit 4 of weight j of a 5-bit block, as 0 or 16.
inline int high_bit(const uint8_t* qh_bytes, int j) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof qh);
  return static_cast<int>((qh >> j) & 1u) << 4;
}

// Packs 32 levels (0..15 or 0..31) into qs (and qh for 5-bit levels).
void pack_low_bits(const uint8_t* levels, uint8_t* qs) {
  for (int j = 0; j < kHalf; ++j)
    qs[j] = static_cast<uint8_t>((levels[j] & 0x0F) | ((levels[j + kHalf] & 0x0F) << 4));
}
void pack_high_bits(const uint8_t* levels, uint8_t* qh_bytes) {
  uint32_t qh = 0;
  for (int j = 0; j < kBlock32; ++j) qh |= static_cast<uint32_t>((levels[j] >> 4) & 1u) << j;
  std::memcpy(qh_bytes, &qh, sizeof qh);
}

// The value of largest magnitude (the first one on ties), as ggml's symmetric quantisers pick it.
float signed_absmax(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kBlock32; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

struct MinMax {
  float min, max;
};
MinMax min_max(const float* x) {
  MinMax r{FLT_MAX, -FLT_MAX};
  for (int j = 0; j < kBlock32; ++j) {
    if (x[j] < r.min) r.min = x[j];
    if (x[j] > r.max) r.max = x[j];
  }
  return r;
}

// Symmetric 8-bit levels, round half away from zero (ggml's roundf); returns sum(q).
int quantize_q8_levels(const float* x, float id, int8_t* qs) {
  int sum = 0;
  for (int j = 0; j < kBlock32; ++j) {
    qs[j] = static_cast<int8_t>(std::round(x[j] * id));
    sum += qs[j];
  }
  return sum;
}

float absmax(const float* x) {
  float amax = 0.0f;
  for (int j = 0; j < kBlock32; ++j) amax = amax > std::fabs(x[j]) ? amax : std::fabs(x[j]);
  return amax;
}

}  // namespace

// ---- dequantisers --------------------------------------------------------------------

void dequantize_q4_0(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kBlock32) {
    const auto b = load_block<BlockQ4_0>(src, i);
    const float d = fp16(b.d);
    for (int j = 0; j < kBlock32; ++j) dst[j] = static_cast<float>(low_bits(b.qs, j) - 8) * d;
  }
}

void dequantize_q4_1(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kBlock32) {
    const auto b = load_block<BlockQ4_1>(src, i);
    const float d = fp16(b.d), m = fp16(b.m);
    for (int j = 0; j < kBlock32; ++j) dst[j] = static_cast<float>(low_bits(b.qs, j)) * d + m;
  }
}

void dequantize_q5_0(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kBlock32) {
    const auto b = load_block<BlockQ5_0>(src, i);
    const float d = fp16(b.d);
    for (int j = 0; j < kBlock32; ++j)
      dst[j] = static_cast<float>((low_bits(b.qs, j) | high_bit(b.qh, j)) - 16) * d;
  }
}

void dequantize_q5_1(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kBlock32) {
    const auto b = load_block<BlockQ5_1>(src, i);
    const float d = fp16(b.d), m = fp16(b.m);
    for (int j = 0; j < kBlock32; ++j)
      dst[j] = static_cast<float>(low_bits(b.qs, j) | high_bit(b.qh, j)) * d + m;
  }
}

void dequantize_q8_0(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kBlock32) {
    const auto b = load_block<BlockQ8_0>(src, i);
    const float d = fp16(b.d);
    for (int j = 0; j < kBlock32; ++j) dst[j] = static_cast<float>(b.qs[j]) * d;
  }
}

void dequantize_q8_1(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kBlock32) {
    const auto b = load_block<BlockQ8_1>(src, i);
    const float d = fp16(b.d);
    for (int j = 0; j < kBlock32; ++j) dst[j] = static_cast<float>(b.qs[j]) * d;
  }
}

// ---- reference quantisers -------------------------------------------------------------
// Levels are truncated after adding 0.5 (ggml's `(int8_t)(x + 8.5f)` etc.), except the
// 8-bit formats, which round half away from zero. A block of zeros gets d = 0 (and id = 0).

// d = -max / 8 so the largest magnitude maps to level 0 (-8 * d); q = min(15, trunc(x/d + 8.5)).
void quantize_q4_0(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kBlock32) {
    const float d = signed_absmax(src) / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t levels[kBlock32];
    for (int j = 0; j < kBlock32; ++j) {
      const int q = static_cast<int>(src[j] * id + 8.5f);
      levels[j] = static_cast<uint8_t>(q < 15 ? q : 15);
    }
    BlockQ4_0 b{};
    b.d = f32_to_f16(d);
    pack_low_bits(levels, b.qs);
    store_block(dst, i, b);
  }
}

// d = (max - min) / 15, m = min; q = min(15, trunc((x - min)/d + 0.5)).
void quantize_q4_1(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kBlock32) {
    const MinMax mm = min_max(src);
    const float d = (mm.max - mm.min) / 15;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t levels[kBlock32];
    for (int j = 0; j < kBlock32; ++j) {
      const int q = static_cast<int>((src[j] - mm.min) * id + 0.5f);
      levels[j] = static_cast<uint8_t>(q < 15 ? q : 15);
    }
    BlockQ4_1 b{};
    b.d = f32_to_f16(d);
    b.m = f32_to_f16(mm.min);
    pack_low_bits(levels, b.qs);
    store_block(dst, i, b);
  }
}

// d = -max / 16; q = min(31, trunc(x/d + 16.5)).
void quantize_q5_0(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kBlock32) {
    const float d = signed_absmax(src) / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t levels[kBlock32];
    for (int j = 0; j < kBlock32; ++j) {
      const int q = static_cast<int>(src[j] * id + 16.5f);
      levels[j] = static_cast<uint8_t>(q < 31 ? q : 31);
    }
    BlockQ5_0 b{};
    b.d = f32_to_f16(d);
    pack_low_bits(levels, b.qs);
    pack_high_bits(levels, b.qh);
    store_block(dst, i, b);
  }
}

// d = (max - min) / 31, m = min; q = trunc((x - min)/d + 0.5) (ggml does not clamp: the
// largest value lands on 31 within rounding).
void quantize_q5_1(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kBlock32) {
    const MinMax mm = min_max(src);
    const float d = (mm.max - mm.min) / 31;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t levels[kBlock32];
    for (int j = 0; j < kBlock32; ++j) levels[j] = static_cast<uint8_t>((src[j] - mm.min) * id + 0.5f);
    BlockQ5_1 b{};
    b.d = f32_to_f16(d);
    b.m = f32_to_f16(mm.min);
    pack_low_bits(levels, b.qs);
    pack_high_bits(levels, b.qh);
    store_block(dst, i, b);
  }
}

// d = absmax / 127; q = roundf(x / d).
void quantize_q8_0(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kBlock32) {
    const float d = absmax(src) / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_0 b{};
    b.d = f32_to_f16(d);
    quantize_q8_levels(src, id, b.qs);
    store_block(dst, i, b);
  }
}

// As Q8_0, plus s = f16(sum(q) * d) with d the unrounded f32 scale.
void quantize_q8_1(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kBlock32) {
    const float d = absmax(src) / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_1 b{};
    b.d = f32_to_f16(d);
    const int sum = quantize_q8_levels(src, id, b.qs);
    b.s = f32_to_f16(static_cast<float>(sum) * d);
    store_block(dst, i, b);
  }
}

// ---- dot products ---------------------------------------------------------------------
// Per block: the exact integer sum of q_w * q_a, then one f32 scaling (in ggml's order of
// operations for that pair), added to an f32 total block by block.

float vec_dot_q4_0_q8_0(const void* w, const void* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    const auto x = load_block<BlockQ4_0>(w, i);
    const auto y = load_block<BlockQ8_0>(a, i);
    int sumi = 0;
    for (int j = 0; j < kBlock32; ++j) sumi += (low_bits(x.qs, j) - 8) * y.qs[j];
    sum += static_cast<float>(sumi) * fp16(x.d) * fp16(y.d);
  }
  return sum;
}

// sum(w * a) = d_w d_a sum(q_w q_a) + m_w * (d_a sum(q_a)), the last factor being Q8_1's s.
float vec_dot_q4_1_q8_1(const void* w, const void* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    const auto x = load_block<BlockQ4_1>(w, i);
    const auto y = load_block<BlockQ8_1>(a, i);
    int sumi = 0;
    for (int j = 0; j < kBlock32; ++j) sumi += low_bits(x.qs, j) * y.qs[j];
    sum += fp16(x.d) * fp16(y.d) * static_cast<float>(sumi) + fp16(x.m) * fp16(y.s);
  }
  return sum;
}

float vec_dot_q5_0_q8_0(const void* w, const void* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    const auto x = load_block<BlockQ5_0>(w, i);
    const auto y = load_block<BlockQ8_0>(a, i);
    int sumi = 0;
    for (int j = 0; j < kBlock32; ++j) sumi += ((low_bits(x.qs, j) | high_bit(x.qh, j)) - 16) * y.qs[j];
    sum += fp16(x.d) * fp16(y.d) * static_cast<float>(sumi);
  }
  return sum;
}

float vec_dot_q5_1_q8_1(const void* w, const void* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    const auto x = load_block<BlockQ5_1>(w, i);
    const auto y = load_block<BlockQ8_1>(a, i);
    int sumi = 0;
    for (int j = 0; j < kBlock32; ++j) sumi += (low_bits(x.qs, j) | high_bit(x.qh, j)) * y.qs[j];
    sum += fp16(x.d) * fp16(y.d) * static_cast<float>(sumi) + fp16(x.m) * fp16(y.s);
  }
  return sum;
}

float vec_dot_q8_0_q8_0(const void* w, const void* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    const auto x = load_block<BlockQ8_0>(w, i);
    const auto y = load_block<BlockQ8_0>(a, i);
    int sumi = 0;
    for (int j = 0; j < kBlock32; ++j) sumi += x.qs[j] * y.qs[j];
    sum += static_cast<float>(sumi) * (fp16(x.d) * fp16(y.d));
  }
  return sum;
}

}  // namespace tokenmill::quant::detail
