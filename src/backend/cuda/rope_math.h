// Per-pair math of RoPE (backend.h: rope, rope_backward): which two elements of a head pair
// j rotates, and the rotation by angle = position * inv_freq[j]. The kernel in rope_kernels.cu
// calls these; tests/backend/cuda/rope_math_test.cpp runs them on the CPU against the float64
// reference.
#pragma once

#include <math.h>

#include <cstdint>

#include "core/host_device.h"

namespace tokenmill::cuda {

// The element indices of pair j inside a head whose first 2 * half elements are rotated:
// Neox (j, j + half), Interleaved (2j, 2j + 1).
struct RopePair {
  int64_t first, second;
};
TM_HOST_DEVICE RopePair rope_pair(bool neox, int64_t j, int64_t half) {
  return neox ? RopePair{j, j + half} : RopePair{2 * j, 2 * j + 1};
}

// How a launch rotates: Neox or interleaved pairs, forward or inverse (the backward), and
// the magnitude the rotated elements are multiplied by (Backend::rope).
struct RopeMode {
  bool neox, inverse;
  float magnitude;
};

// cos and sin of the angle, rounded to f32, each times the magnitude (in f32).
struct RopeRotation {
  float cos, sin;
};

// The rotation of a pair at `position` with frequency inv_freq (negated angle when
// `mode.inverse`, the backward). The angle and its cos/sin are computed in double, as the CPU
// backend does: an f32 product position * inv_freq is off by up to ~5e-4 rad at position
// 4096, and f32 range reduction loses more at position 131072.
TM_HOST_DEVICE RopeRotation rope_rotation(int32_t position, float inv_freq, RopeMode mode) {
  const double angle = static_cast<double>(position) * static_cast<double>(inv_freq);
  const float s = static_cast<float>(sin(angle)) * mode.magnitude;
  return {static_cast<float>(cos(angle)) * mode.magnitude, mode.inverse ? -s : s};
}

// (a, b) <- (a cos - b sin, b cos + a sin).
TM_HOST_DEVICE void rope_rotate(float& a, float& b, RopeRotation r) {
  const float a0 = a, b0 = b;
  a = a0 * r.cos - b0 * r.sin;
  b = b0 * r.cos + a0 * r.sin;
}

}  // namespace tokenmill::cuda
