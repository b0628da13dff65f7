// Per-element math of the activations and their derivatives (backend.h: gelu, silu, swiglu
// and their backward), f32 as the CPU backend computes them. The kernels in
// pointwise_kernels.cu call these; tests/backend/cuda/activation_math_test.cpp runs them on
// the CPU against the float64 reference.
#pragma once

#include <math.h>

#include "core/host_device.h"

namespace tokenmill::cuda {

constexpr float kGeluC = 0.7978845608028654f;       // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;                 // the cubic term of GPT-2's gelu
constexpr float kInvSqrt2 = 0.70710678118654752f;   // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = 0.3989422804014327f;  // 1 / sqrt(2 pi), the normal density at 0

// x * sigmoid(a) = x / (1 + e^-a): no cancellation for either sign; e^-a = inf gives -0 or 0.
TM_HOST_DEVICE float times_sigmoid(float x, float a) { return x / (1.0f + expf(-a)); }

TM_HOST_DEVICE float sigmoid(float a) { return times_sigmoid(1.0f, a); }

// GPT-2 gelu: 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3).
TM_HOST_DEVICE float gelu_tanh(float x) {
  return times_sigmoid(x, x * (2.0f * kGeluC + 2.0f * kGeluC * kGeluA * x * x));
}

// Exact gelu: x Phi(x), Phi(x) = erfc(-x / sqrt 2) / 2 (erfc keeps Phi's relative accuracy
// for x < 0, where 1 + erf would cancel).
TM_HOST_DEVICE float gelu_erf(float x) { return 0.5f * x * erfcf(-x * kInvSqrt2); }

TM_HOST_DEVICE float gelu(float x, bool tanh_form) { return tanh_form ? gelu_tanh(x) : gelu_erf(x); }

// gelu_tanh' = (1 + t)/2 + x/2 (1 - t^2) u' = s + 2 x s (1 - s) u', t = tanh(u),
// u = c (x + a x^3), u' = c (1 + 3 a x^2), s = sigmoid(2u) = (1 + t)/2: the sigmoid form
// keeps the tiny derivative of a large negative x, where 1 + t cancels to 0.
TM_HOST_DEVICE float gelu_tanh_derivative(float x) {
  const float s = sigmoid(x * (2.0f * kGeluC + 2.0f * kGeluC * kGeluA * x * x));
  return s + 2.0f * x * s * (1.0f - s) * kGeluC * (1.0f + 3.0f * kGeluA * x * x);
}

// gelu_erf' = Phi(x) + x phi(x), phi the standard normal density.
TM_HOST_DEVICE float gelu_erf_derivative(float x) {
  return 0.5f * erfcf(-x * kInvSqrt2) + x * expf(-0.5f * x * x) * kInvSqrt2Pi;
}

TM_HOST_DEVICE float gelu_derivative(float x, bool tanh_form) {
  return tanh_form ? gelu_tanh_derivative(x) : gelu_erf_derivative(x);
}

TM_HOST_DEVICE float silu(float x) { return times_sigmoid(x, x); }

TM_HOST_DEVICE float swiglu(float gate, float up) { return silu(gate) * up; }

// Backend::clamped_swiglu, rounded as the CPU kernel: glu = g sigmoid(g alpha), then (u + 1) glu.
TM_HOST_DEVICE float clamped_swiglu(float gate, float up, float alpha, float limit) {
  const float g = fminf(gate, limit);
  return (fmaxf(fminf(up, limit), -limit) + 1.0f) * times_sigmoid(g, g * alpha);
}

// The gradients of a gated unit's two inputs. Of y = silu(gate) up for the upstream
// gradient dy, s = sigmoid(gate):  dgate = dy up s (1 + gate (1 - s)),  dup = dy gate s.
struct SwigluGrads {
  float dgate, dup;
};
TM_HOST_DEVICE SwigluGrads swiglu_grads(float gate, float up, float dy) {
  const float s = sigmoid(gate);
  return {dy * up * s * (1.0f + gate * (1.0f - s)), dy * gate * s};
}

// Of y = gelu_tanh(gate) up:  dgate = dy up gelu_tanh'(gate),  dup = dy gelu_tanh(gate).
TM_HOST_DEVICE SwigluGrads geglu_grads(float gate, float up, float dy) {
  return {dy * up * gelu_tanh_derivative(gate), dy * gelu_tanh(gate)};
}

// Of y = cap tanh(x / cap), from y: dx = dy (1 - (y / cap)^2) = dy (cap - y) (cap + y) / cap^2,
// the form without cancellation near saturation (cap - |y| is exact there).
TM_HOST_DEVICE float softcap_gradient(float y, float cap, float dy) {
  return dy / (cap * cap) * ((cap - y) * (cap + y));
}

}  // namespace tokenmill::cuda
