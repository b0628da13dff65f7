// ggml's reference quantisers for the k-quant weight formats (quantize_row_q4_K_ref,
// quantize_row_q5_K_ref, quantize_row_q6_K_ref: no importance matrix), step for step so
// the bytes equal llama.cpp's for the same input. Layouts: quant_block_math.h.
//
// Both kinds first fit each sub-block on its own (an f32 scale, and for Q4_K/Q5_K a min),
// then quantize those sub-block scales against one f16 super-block scale, and finally
// re-derive every weight's level from the scales as a reader will decode them.
// Rounding is ggml's nearest_int (ties to even) throughout.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant/quant_reference_detail.h"

namespace tokenmill::quant::detail {

namespace {

using block::kSub16;
using block::kSub32;
constexpr int kMaxSub = 32;             // the longest sub-block the fits below handle
constexpr float kGroupMaxEps = 1e-15f;  // ggml's GROUP_MAX_EPS: a sub-block this small is zero

inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// ggml's make_qkx2_quants (with use_mad = false): fits x[i] ~ scale * L[i] - the_min with
// levels L in [0, nmax], minimising sum weights[i] * err^2. Returns scale; stores the_min
// (>= 0: the offset is never positive). Starts from the min/max grid, then tries nstep + 1
// grids with nmax stretched by rmin + rdelta * is and keeps the least-squares (scale, min)
// of the best one.
float fit_scale_and_min(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                        float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(clamp_int(block::nearest_int(iscale * (x[i] - min)), 0, nmax));
    const float diff = scale * static_cast<float>(L[i]) + min - x[i];
    best_error += weights[i] * (diff * diff);
  }
  uint8_t trial[kMaxSub];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(block::nearest_int(iscale * (x[i] - min)), 0, nmax);
      trial[i] = static_cast<uint8_t>(l);
      const float wl = weights[i] * static_cast<float>(l);
      sum_l += wl;
      sum_l2 += wl * static_cast<float>(l);
      sum_xl += wl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float error = 0;
      for (int i = 0; i < n; ++i) {
        const float diff = this_scale * static_cast<float>(trial[i]) + this_min - x[i];
        error += weights[i] * (diff * diff);
      }
      if (error < best_error) {
        std::memcpy(L, trial, static_cast<size_t>(n));
        best_error = error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// ggml's make_qx_quants with rmse_type 1 and no importance weights: fits x[i] ~ scale * l[i]
// with l in [-nmax, nmax) (stored as L = l + nmax), weighting errors by x^2. The grid is
// -nmax / max (max: the value of largest magnitude), then 18 stretched grids; each grid's
// least-squares scale is kept if it explains more of x. Returns the scale (may be negative).
float fit_symmetric_scale(int n, int nmax, const float* x, int8_t* L) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  const auto level = [&](float iscale, int i) {
    return clamp_int(block::nearest_int(iscale * x[i]), -nmax, nmax - 1);
  };
  // sum w x l and sum w l^2 for the levels of grid `iscale`, w = x^2.
  const auto sums = [&](float iscale, float& sumlx, float& suml2) {
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const float l = static_cast<float>(level(iscale, i));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
  };
  float iscale = static_cast<float>(-nmax) / max;
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(level(iscale, i) + nmax);
  float sumlx, suml2;
  sums(iscale, sumlx, suml2);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sums(iscale, sumlx, suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(level(iscale, i) + nmax);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// The shared part of Q4_K and Q5_K: fits the 8 sub-blocks of one super-block (levels in
// [0, nmax]), packs their 6-bit scales and mins (block::scale_min_k4 layout) and the f16
// d / dmin, and writes the final levels to L.
struct ScalesK4 {
  uint16_t d, dmin;
  uint8_t scales[kScaleBytesK];
};
ScalesK4 quantize_scales_k4(const float* x, int nmax, float rmin, int nstep, uint8_t* L) {
  float scales[kSub32], mins[kSub32];
  float max_scale = 0, max_min = 0;
  for (int s = 0; s < kSub32; ++s) {
    const float* xs = x + 32 * s;
    // Weights favour large values: rms of the sub-block plus |x|.
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    float weights[32];
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[s] = fit_scale_and_min(32, nmax, xs, weights, L + 32 * s, &mins[s], rmin, 0.1f, nstep);
    if (scales[s] > max_scale) max_scale = scales[s];
    if (mins[s] > max_min) max_min = mins[s];
  }

  ScalesK4 out{};
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int s = 0; s < kSub32; ++s) {
    // ggml stores nearest_int into a uint8_t before clamping: keep that wrap-around.
    auto ls = static_cast<uint8_t>(block::nearest_int(inv_scale * scales[s]));
    auto lm = static_cast<uint8_t>(block::nearest_int(inv_min * mins[s]));
    if (ls > 63) ls = 63;
    if (lm > 63) lm = 63;
    if (s < 4) {
      out.scales[s] |= ls;
      out.scales[s + 4] |= lm;
    } else {
      out.scales[s + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      out.scales[s - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      out.scales[s] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  out.d = f32_to_f16(max_scale / 63.f);
  out.dmin = f32_to_f16(max_min / 63.f);

  // Re-derive the levels from the stored scales; a sub-block whose scale rounds to zero
  // keeps the levels of its fit.
  for (int s = 0; s < kSub32; ++s) {
    const block::ScaleMin sm = block::scale_min_k4(out.scales, s);
    const float d = block::fp16(out.d) * static_cast<float>(sm.scale);
    if (d == 0.0f) continue;
    const float dm = block::fp16(out.dmin) * static_cast<float>(sm.min);
    for (int l = 0; l < 32; ++l)
      L[32 * s + l] = static_cast<uint8_t>(clamp_int(block::nearest_int((x[32 * s + l] + dm) / d), 0, nmax));
  }
  return out;
}

}  // namespace

void quantize_q4_k(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kBlock256) {
    uint8_t L[kBlock256];
    const ScalesK4 sc = quantize_scales_k4(src, 15, -1.0f, 20, L);
    BlockQ4_K b{};
    b.d = sc.d;
    b.dmin = sc.dmin;
    std::memcpy(b.scales, sc.scales, sizeof b.scales);
    for (int g = 0; g < 4; ++g)
      for (int l = 0; l < 32; ++l)
        b.qs[32 * g + l] = static_cast<uint8_t>(L[64 * g + l] | (L[64 * g + 32 + l] << 4));
    block::store(dst, i, b);
  }
}

void quantize_q5_k(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kBlock256) {
    uint8_t L[kBlock256];
    const ScalesK4 sc = quantize_scales_k4(src, 31, -0.5f, 15, L);
    BlockQ5_K b{};
    b.d = sc.d;
    b.dmin = sc.dmin;
    std::memcpy(b.scales, sc.scales, sizeof b.scales);
    for (int g = 0; g < 4; ++g)
      for (int l = 0; l < 32; ++l)
        b.qs[32 * g + l] = static_cast<uint8_t>((L[64 * g + l] & 0xF) | ((L[64 * g + 32 + l] & 0xF) << 4));
    for (int n = 0; n < kBlock256; ++n) b.qh[n % 32] |= static_cast<uint8_t>((L[n] >> 4) << (n / 32));
    block::store(dst, i, b);
  }
}

void quantize_q6_k(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kBlock256) {
    int8_t L[kBlock256];
    float scales[kSub16];
    float max_scale = 0, max_abs_scale = 0;
    for (int s = 0; s < kSub16; ++s) {
      scales[s] = fit_symmetric_scale(16, 32, src + 16 * s, L + 16 * s);
      if (std::fabs(scales[s]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[s]);
        max_scale = scales[s];
      }
    }
    BlockQ6_K b{};  // all zero: d = 0 for a (near-)zero super-block
    if (max_abs_scale >= kGroupMaxEps) {
      // The scale of largest magnitude maps to -128 (so scales may reach +127 at most).
      const float iscale = -128.f / max_scale;
      b.d = f32_to_f16(1 / iscale);
      for (int s = 0; s < kSub16; ++s) {
        const int q = block::nearest_int(iscale * scales[s]);
        b.scales[s] = static_cast<int8_t>(q < 127 ? q : 127);
      }
      for (int s = 0; s < kSub16; ++s) {
        const float d = block::fp16(b.d) * static_cast<float>(b.scales[s]);
        if (d == 0.0f) continue;  // keeps the levels of the sub-block fit
        for (int l = 0; l < 16; ++l)
          L[16 * s + l] =
              static_cast<int8_t>(clamp_int(block::nearest_int(src[16 * s + l] / d), -32, 31) + 32);
      }
      for (int n = 0; n < kBlock256; ++n) {
        const int h = n / 128, c = (n % 128) / 32, l = n % 32;
        uint8_t& ql = b.ql[64 * h + 32 * (c & 1) + l];
        ql |= static_cast<uint8_t>(c < 2 ? (L[n] & 0xF) : (L[n] & 0xF) << 4);
        b.qh[32 * h + l] |= static_cast<uint8_t>(((L[n] >> 4) & 3) << (2 * c));
      }
    }
    block::store(dst, i, b);
  }
}

}  // namespace tokenmill::quant::detail
