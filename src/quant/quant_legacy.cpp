// ggml's reference quantisers (quantize_row_*_ref) for the 32-weight weight formats with
// their own fit: Q4_0, Q4_1, Q5_0, Q5_1, MXFP4. Q8_0 weights and the Q8 activation formats
// use the block quantisers of quant_block_math.h, which also documents the bit positions.
// Values, all f32 arithmetic, d/m read from f16:
//   Q4_0  w = (q - 8) * d        Q4_1  w = q * d + m
//   Q5_0  w = (q - 16) * d       Q5_1  w = q * d + m
//   MXFP4 w = mxfp4_value(q) * d, d = e8m0_half(e) = 2^(e - 128)
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

// ggml's best_index_mxfp4: the nibble whose value mxfp4_value(q) * d is nearest to x, the
// first of q = 0..15 on ties (so ties go to the smaller magnitude, and 0 is +0).
int nearest_mxfp4(float x, float d) {
  int best = 0;
  float best_err = INFINITY;
  for (int q = 0; q < 16; ++q) {
    const float err = std::fabs(static_cast<float>(block::mxfp4_value(q)) * d - x);
    if (err < best_err) {
      best = q;
      best_err = err;
    }
  }
  return best;
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

// e = floor(log2f(amax)) - 2 + 127, so that d = 2^(e - 128) puts amax / d in [8, 16) (ggml's
// rule: values past 14 d clamp to 12 d); e = 0 for a block of zeros. log2f, as ggml calls it,
// rounds up to k for the few floats just below 2^k once |k| >= 2 (the floor of the exact
// log2, the float's exponent, would not).
// Below amax = 2^-125 the exponent is negative and wraps modulo 256, as ggml's (uint8_t) cast
// does on x86-64 and numpy's astype(uint8) does in gguf-py; an infinite amax gives e = 0, the
// low byte of x86's integer-indefinite result.
void quantize_mxfp4(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kBlock32) {
    float amax = 0.0f;
    for (int j = 0; j < kBlock32; ++j) amax = amax < std::fabs(src[j]) ? std::fabs(src[j]) : amax;
    const bool scaled = amax > 0.0f && std::isfinite(amax);
    const int e = scaled ? static_cast<int>(std::floor(std::log2(amax)) - 2 + 127) : 0;
    BlockMXFP4 b{};
    b.e = static_cast<uint8_t>(e);
    const float d = block::e8m0_half(b.e);
    uint8_t levels[kBlock32];
    for (int j = 0; j < kBlock32; ++j) levels[j] = static_cast<uint8_t>(nearest_mxfp4(src[j], d));
    pack_low_bits(levels, b.qs);
    block::store(dst, i, b);
  }
}

}  // namespace tokenmill::quant::detail
