// Per-element math of the training ops (backend.h: cross_entropy, adamw_step): the AdamW
// update, the (max, sum) log-sum-exp partials that cross_entropy's kernel merges over chunks
// of a row, and the cross-entropy loss and gradient element. The kernels in
// training_kernels.cu call these; tests/backend/cuda/training_math_test.cpp runs them on the
// CPU against the CPU backend and the float64 reference.
//
// Rounding: nvcc contracts a * b + c into an FMA wherever it can (across statements too), so
// the f32 arithmetic that must round as written goes through the helpers below (__fmul_rn
// and friends on the device, which are never contracted; plain operators on the host, where
// callers compile without contraction: -ffp-contract=off). The FMAs that are meant are
// written as fmaf.
#pragma once

#include <math.h>

#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace tokenmill::cuda {

// ---------------------------------------------------------------- f32 with the rounding written

TM_HOST_DEVICE float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

TM_HOST_DEVICE float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

TM_HOST_DEVICE float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

TM_HOST_DEVICE float div_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

TM_HOST_DEVICE float sqrt_rn(float a) {
#ifdef __CUDA_ARCH__
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

// a * b + c rounded once.
TM_HOST_DEVICE float fma_rn(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// ---------------------------------------------------------------- AdamW

// The f32 scalars of one AdamW step, computed once on the host as the CPU backend computes
// them (cpu/backward_linear.cpp): from the f32 hyperparameters in double (PyTorch's Python
// floats), rounded to f32 where they meet the f32 tensors.
struct AdamWScalars {
  float decay = 1;            // 1 - lr * weight_decay
  float one_minus_beta1 = 0;  // the lerp weight of m
  float beta2 = 0, one_minus_beta2 = 0;
  float step_size = 0;              // lr / (1 - beta1^t)
  float bias_correction2_sqrt = 0;  // sqrt(1 - beta2^t)
  float eps = 0;
  float grad_scale = 1;
};

// Host only (std::pow in double, as the CPU backend). 1 - lr * weight_decay is one FMA in
// double: both GCC and Clang contract the CPU backend's expression so (-march=x86-64-v3).
inline AdamWScalars adamw_scalars(float lr, float beta1, float beta2, float eps, float weight_decay,
                                  int64_t step, float grad_scale) {
  const auto steps = static_cast<double>(step);
  const double b1 = beta1, b2 = beta2;
  AdamWScalars s;
  s.decay = static_cast<float>(std::fma(-static_cast<double>(lr), static_cast<double>(weight_decay), 1.0));
  s.one_minus_beta1 = static_cast<float>(1.0 - b1);
  s.beta2 = beta2;
  s.one_minus_beta2 = static_cast<float>(1.0 - b2);
  s.step_size = static_cast<float>(static_cast<double>(lr) / (1.0 - std::pow(b1, steps)));
  s.bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(b2, steps)));
  s.eps = eps;
  s.grad_scale = grad_scale;
  return s;
}

struct AdamWElement {
  float param, m, v;
};

// One element of PyTorch's AdamW (torch.optim.adamw), g = grad_scale * grad:
//   param.mul_(1 - lr * wd); m.lerp_(g, 1 - beta1); v.mul_(beta2).addcmul_(g, g, 1 - beta2)
//   param.addcdiv_(m, sqrt(v) / sqrt(bias_correction2) + eps, -lr / bias_correction1)
// with the roundings of the CPU backend's loop as GCC and Clang compile it (contracted at
// -march=x86-64-v3): three of the sums are single FMAs,
//   m' = fma(1 - beta1, g - m, m),  v' = fma(v, beta2, ((1 - beta2) g) g),
//   param' = fma(param, decay, -(step_size m') / denom),
// so that GPU and CPU agree to the last bit (training_math_test checks it).
TM_HOST_DEVICE AdamWElement adamw_update(const AdamWScalars& s, float param, float grad, float m, float v) {
  const float g = mul_rn(s.grad_scale, grad);
  const float m_next = fma_rn(s.one_minus_beta1, sub_rn(g, m), m);
  const float v_next = fma_rn(v, s.beta2, mul_rn(mul_rn(s.one_minus_beta2, g), g));
  const float denom = add_rn(div_rn(sqrt_rn(v_next), s.bias_correction2_sqrt), s.eps);
  const float update = div_rn(mul_rn(s.step_size, m_next), denom);
  return {fma_rn(param, s.decay, -update), m_next, v_next};
}

// ---------------------------------------------------------------- log-sum-exp partials

// A part of a row summarised as max and sum of exp(x - max) (sum in double); the empty part
// is {-inf, 0}. logsumexp = max + log(sum).
struct LsePartial {
  float max;
  double sum;
};

TM_HOST_DEVICE LsePartial lse_empty() { return {-INFINITY, 0.0}; }

// The partial of both parts: the sums rescaled to the larger max (the factor exp(lo - hi) in
// double, from an exact difference). Commutative; bits depend only on the two partials.
TM_HOST_DEVICE LsePartial lse_merge(LsePartial a, LsePartial b) {
  const bool a_is_hi = a.max >= b.max;
  const LsePartial hi = a_is_hi ? a : b, lo = a_is_hi ? b : a;
  if (lo.sum == 0.0) return hi;  // empty, or nothing but -inf
  return {hi.max, hi.sum + lo.sum * exp(static_cast<double>(lo.max) - static_cast<double>(hi.max))};
}

// The partial with one more element x: exp(x - max) in f32 as the CPU backend, and a double
// rescale only when x is a new max (rare after the first few elements).
TM_HOST_DEVICE LsePartial lse_add(LsePartial p, float x) {
  if (x > p.max) return {x, p.sum * exp(static_cast<double>(p.max) - static_cast<double>(x)) + 1.0};
  if (x == -INFINITY) return p;  // exp(-inf) adds nothing (and -inf - -inf would be NaN)
  return {p.max, p.sum + static_cast<double>(expf(x - p.max))};
}

// ---------------------------------------------------------------- cross-entropy

// loss = logsumexp - logit[target] = (max - logit[target]) + log(sum), as the CPU backend.
TM_HOST_DEVICE float cross_entropy_loss(LsePartial row, float target_logit) {
  return static_cast<float>(static_cast<double>(row.max) - static_cast<double>(target_logit) + log(row.sum));
}

// grad_scale / sum, the factor that turns exp(x - max) into grad_scale * softmax(x).
TM_HOST_DEVICE float cross_entropy_scale(LsePartial row, float grad_scale) {
  return static_cast<float>(static_cast<double>(grad_scale) / row.sum);
}

// dlogits = grad_scale * (softmax(x) - onehot(target)) for one element of the row.
TM_HOST_DEVICE float cross_entropy_grad(float x, float row_max, float scale, float grad_scale,
                                        bool is_target) {
  const float p = mul_rn(expf(x - row_max), scale);
  return is_target ? sub_rn(p, grad_scale) : p;
}

}  // namespace tokenmill::cuda
