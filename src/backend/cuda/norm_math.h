// Per-row and per-element math of the norms (backend.h: rms_norm, layer_norm and their
// backward), given the row sums the kernels reduce (norm_kernels.cu, norm_backward_kernels.cu).
// The forward is f32 as the CPU backend computes it; the backward combines its row sums in
// double (dx is a difference of nearly equal terms when a row has few elements). Tested on
// the CPU against the float64 reference by tests/backend/cuda/norm_math_test.cpp.
#pragma once

#include <math.h>

#include <cstdint>

#include "core/host_device.h"

namespace tokenmill::cuda {

// ---------------------------------------------------------------- forward (f32)

// 1 / sqrt(sum / d + eps): the scale r of rms_norm (sum = sum x^2) and of layer_norm
// (sum = sum (x - mean)^2, the biased variance times d).
TM_HOST_DEVICE float norm_scale(float sum, int64_t d, float eps) {
  return 1.0f / sqrtf(sum / static_cast<float>(d) + eps);
}

TM_HOST_DEVICE float rms_norm_element(float x, float r, float weight) { return x * r * weight; }

TM_HOST_DEVICE float layer_norm_element(float x, float mean, float r, float weight, float bias) {
  return (x - mean) * r * weight + bias;
}

// ---------------------------------------------------------------- backward (double rows)

// rms_norm, y = x r w, per row with g = w dy:  dx = r g - x r^3 / d * sum(g x).
struct RmsNormBackwardRow {
  double mean;       // 0: xhat = (x - mean) r = x r, for the parameter gradient
  double r, x_coef;  // r and r^3 / d * sum(g x)
};
TM_HOST_DEVICE RmsNormBackwardRow rms_norm_backward_row(double sum_squares, double sum_gx, int64_t d,
                                                        float eps) {
  const auto dd = static_cast<double>(d);
  const double r = 1.0 / sqrt(sum_squares / dd + static_cast<double>(eps));
  return {0.0, r, r * r * r * sum_gx / dd};
}
TM_HOST_DEVICE float norm_dx(float x, float weight, float dy, const RmsNormBackwardRow& row) {
  return static_cast<float>(row.r * (static_cast<double>(weight) * dy) - x * row.x_coef);
}

// layer_norm, y = xhat w + b, xhat = (x - mean) r, per row with g = w dy:
//   dx = r (g - mean(g) - xhat mean(g xhat)).
struct LayerNormBackwardRow {
  double mean, r, mean_g, mean_gx;  // mean(g), mean(g xhat)
};
// From mean and the row sums sum (x - mean)^2, sum g and sum g (x - mean).
TM_HOST_DEVICE LayerNormBackwardRow layer_norm_backward_row(double mean, double sum_centered_squares,
                                                            double sum_g, double sum_g_centered, int64_t d,
                                                            float eps) {
  const auto dd = static_cast<double>(d);
  const double r = 1.0 / sqrt(sum_centered_squares / dd + static_cast<double>(eps));
  return {mean, r, sum_g / dd, sum_g_centered * r / dd};
}
TM_HOST_DEVICE float norm_dx(float x, float weight, float dy, const LayerNormBackwardRow& row) {
  return static_cast<float>(
      row.r * (static_cast<double>(weight) * dy - row.mean_g - (x - row.mean) * row.r * row.mean_gx));
}

// The per-row term of dweight: dy xhat, xhat = (x - mean) r (the row's `mean` and `r` of
// either norm; dbias adds dy itself).
TM_HOST_DEVICE double norm_dweight_term(float x, float dy, double mean, double r) {
  return static_cast<double>(dy) * ((x - mean) * r);
}

}  // namespace tokenmill::cuda
