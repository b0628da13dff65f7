// ggml's reference quantisers (quantize_row_*_ref) for the 32-weight weight formats with
// their own fit: Q4_0, Q4_1, Q5_0, Q5_1. Q8_0 weights and the Q8 activation formats use the
// block quantisers of quant_block_math.h, which also documents the bit positions.
// Values, all f32 arithmetic, d/m read from f16:
//   Q4_0  w = (q - 8) * d        Q4_1  w = q * d + m
//   Q5_0  w = (q - 16) * d       Q5_1  w = q * d + m
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant/quant_reference_detail.h"

namespace tokenmill::quant::detail {

namespace {

using block::kHalf32;

// Packs 32 levels (0..15 or 0..31) into qs (and qh for 5-bit levels).
void pack_low_bits(const uint8_t* levels, uint8_t* qs) {
  for (int j = 0; j < kHalf32; ++j)
    qs[j] = static_cast<uint8_t>((levels[j] & 0x0F) | ((levels[j + kHalf32] & 0x0F) << 4));
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

}  // namespace

// Levels are truncated after adding 0.5 (ggml's `(int8_t)(x + 8.5f)` etc.). A block of zeros
// gets d = 0 (and id = 0).

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
    block::store(dst, i, b);
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
    block::store(dst, i, b);
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
    block::store(dst, i, b);
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
    block::store(dst, i, b);
  }
}

}  // namespace tokenmill::quant::detail
