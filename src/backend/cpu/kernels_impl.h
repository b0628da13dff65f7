// The CPU kernels, written once as templates over a SIMD wrapper `S` (Avx2 or Avx512).
//
// Reached only from kernels_avx2.cpp and kernels_avx512.cpp (through kernel_table_impl.h,
// with attention_impl.h) and amx_attention.cpp (through attention_impl.h), after their
// wrapper header. Everything here has internal linkage
// (anonymous namespace), and these files call no inline function from another header: an
// out-of-line copy of such a function compiled with AVX-512 enabled could otherwise be
// picked by the linker for baseline callers.
//
// A wrapper provides: V (the vector type), kWidth (f32 lanes), kRegisters, kTileTokens,
// zero/set1/load/store, load_bf16/load_f16 (kWidth 16-bit values widened to f32),
// add/sub/mul/div/fma/fnma/max/min/abs/copysign/round/ldexp, reduce_add/reduce_max and
// reduce_add4 (four horizontal sums as one __m128), transpose (a kWidth x kWidth block).
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/cpu/kernels.h"

namespace tokenmill::cpu {
namespace {

// ---------------------------------------------------------------- loads and stores

// The storage element of a weight dtype: f32, or the raw 16 bits of a bf16/f16.
template <DType D>
using Storage = std::conditional_t<D == DType::F32, float, uint16_t>;

// kWidth floats from p[0, lanes) and `fill` beyond; lanes may be <= 0 (all fill).
template <class S>
typename S::V load_n(const float* p, int64_t lanes, float fill = 0.0f) {
  if (lanes >= S::kWidth) return S::load(p);
  alignas(64) float tmp[S::kWidth];
  for (int i = 0; i < S::kWidth; ++i) tmp[i] = i < lanes ? p[i] : fill;
  return S::load(tmp);
}

// Stores the first `lanes` lanes of v (none when lanes <= 0).
template <class S>
void store_n(float* p, typename S::V v, int64_t lanes) {
  if (lanes >= S::kWidth) {
    S::store(p, v);
    return;
  }
  if (lanes <= 0) return;
  alignas(64) float tmp[S::kWidth];
  S::store(tmp, v);
  std::memcpy(p, tmp, static_cast<size_t>(lanes) * sizeof(float));
}

// kWidth weights from p, widened to f32.
template <class S, DType D>
typename S::V load_w(const Storage<D>* p) {
  if constexpr (D == DType::F32) {
    return S::load(p);
  } else if constexpr (D == DType::BF16) {
    return S::load_bf16(p);
  } else {
    return S::load_f16(p);
  }
}

// Weights p[0, lanes), zero beyond; never reads past p + lanes.
template <class S, DType D>
typename S::V load_w_n(const Storage<D>* p, int64_t lanes) {
  if (lanes >= S::kWidth) return load_w<S, D>(p);
  Storage<D> tmp[S::kWidth] = {};
  if (lanes > 0) std::memcpy(tmp, p, static_cast<size_t>(lanes) * sizeof(Storage<D>));
  return load_w<S, D>(tmp);
}

// ---------------------------------------------------------------- transcendental math

// e^x with ~1 ulp error on [-87, 88] (Cephes expf polynomial); inputs are clamped to
// that range, so large negative x gives ~1e-38 instead of 0 and nothing overflows.
template <class S>
typename S::V exp(typename S::V x) {
  using V = typename S::V;
  x = S::min(S::max(x, S::set1(-87.0f)), S::set1(88.0f));
  const V n = S::round(S::mul(x, S::set1(1.44269504088896341f)));
  V r = S::fnma(n, S::set1(0.693359375f), x);  // x - n ln2, ln2 split in two for accuracy
  r = S::fnma(n, S::set1(-2.12194440e-4f), r);
  V p = S::set1(1.9875691500e-4f);
  p = S::fma(p, r, S::set1(1.3981999507e-3f));
  p = S::fma(p, r, S::set1(8.3334519073e-3f));
  p = S::fma(p, r, S::set1(4.1665795894e-2f));
  p = S::fma(p, r, S::set1(1.6666665459e-1f));
  p = S::fma(p, r, S::set1(5.0000001201e-1f));
  p = S::fma(p, S::mul(r, r), S::add(r, S::set1(1.0f)));
  return S::ldexp(p, n);
}

// x * sigmoid(a) = x / (1 + e^-a): no cancellation for either sign.
template <class S>
typename S::V times_sigmoid(typename S::V x, typename S::V a) {
  return S::div(x, S::add(S::set1(1.0f), exp<S>(S::sub(S::zero(), a))));
}

// GPT-2 gelu: 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = c (x + a x^3), c = sqrt(2/pi).
constexpr float kGeluC = 0.7978845608028654f, kGeluA = 0.044715f;

// 2u for x, given x2 = x^2.
template <class S>
typename S::V gelu_two_u(typename S::V x, typename S::V x2) {
  return S::mul(x, S::fma(x2, S::set1(2.0f * kGeluC * kGeluA), S::set1(2.0f * kGeluC)));
}

template <class S>
typename S::V gelu_tanh_v(typename S::V x) {
  return times_sigmoid<S>(x, gelu_two_u<S>(x, S::mul(x, x)));
}

// Its derivative: with s = sigmoid(2u), tanh(u) = 2s - 1, so
//   gelu'(x) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u' = s + 2 x s (1 - s) u',
//   u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
template <class S>
typename S::V gelu_tanh_derivative_v(typename S::V x) {
  const auto x2 = S::mul(x, x);
  const auto s = times_sigmoid<S>(S::set1(1.0f), gelu_two_u<S>(x, x2));
  const auto du = S::fma(x2, S::set1(3.0f * kGeluA * kGeluC), S::set1(kGeluC));
  const auto x_s_rest = S::mul(S::mul(x, s), S::sub(S::set1(1.0f), s));  // x s (1 - s)
  return S::fma(S::mul(S::set1(2.0f), x_s_rest), du, s);
}

// The standard normal CDF Phi(x) = 0.5 erfc(-x / sqrt(2)), erfc from the Chebyshev fit of
// Numerical Recipes (fractional error < 1.2e-7 for every argument).
template <class S>
typename S::V normal_cdf_v(typename S::V x) {
  using V = typename S::V;
  const V z = S::mul(S::abs(x), S::set1(0.70710678118654752f));
  const V t = S::div(S::set1(1.0f), S::fma(z, S::set1(0.5f), S::set1(1.0f)));
  V p = S::set1(0.17087277f);
  p = S::fma(p, t, S::set1(-0.82215223f));
  p = S::fma(p, t, S::set1(1.48851587f));
  p = S::fma(p, t, S::set1(-1.13520398f));
  p = S::fma(p, t, S::set1(0.27886807f));
  p = S::fma(p, t, S::set1(-0.18628806f));
  p = S::fma(p, t, S::set1(0.09678418f));
  p = S::fma(p, t, S::set1(0.37409196f));
  p = S::fma(p, t, S::set1(1.00002368f));
  p = S::fma(p, t, S::set1(-1.26551223f));
  const V half_erfc = S::mul(S::set1(0.5f), S::mul(t, exp<S>(S::fnma(z, z, p))));  // 0.5 erfc(|x|/sqrt2)
  // Phi = half_erfc for x < 0 and 1 - half_erfc for x >= 0.
  return S::add(S::set1(0.5f), S::copysign(S::sub(S::set1(0.5f), half_erfc), x));
}

// Exact gelu: x Phi(x).
template <class S>
typename S::V gelu_erf_v(typename S::V x) {
  return S::mul(x, normal_cdf_v<S>(x));
}

// Its derivative: Phi(x) + x phi(x), phi(x) = e^(-x^2 / 2) / sqrt(2 pi).
template <class S>
typename S::V gelu_erf_derivative_v(typename S::V x) {
  const auto pdf = S::mul(exp<S>(S::mul(S::set1(-0.5f), S::mul(x, x))), S::set1(0.3989422804014327f));
  return S::fma(x, pdf, normal_cdf_v<S>(x));
}

// ---------------------------------------------------------------- elementwise and rows

// y[i] = f(x[i]) over whole vectors and a partial tail.
template <class S, class F>
void map_unary(const float* x, int64_t count, float* y, F f) {
  for (int64_t i = 0; i < count; i += S::kWidth) store_n<S>(y + i, f(load_n<S>(x + i, count - i)), count - i);
}

template <class S, class F>
void map_binary(const float* a, const float* b, int64_t count, float* y, F f) {
  for (int64_t i = 0; i < count; i += S::kWidth)
    store_n<S>(y + i, f(load_n<S>(a + i, count - i), load_n<S>(b + i, count - i)), count - i);
}

template <class S>
void gelu_tanh(const float* x, int64_t count, float* y) {
  map_unary<S>(x, count, y, [](typename S::V v) { return gelu_tanh_v<S>(v); });
}
template <class S>
void gelu_erf(const float* x, int64_t count, float* y) {
  map_unary<S>(x, count, y, [](typename S::V v) { return gelu_erf_v<S>(v); });
}
// dx = dy gelu'(x) (dx may be dy or x: each vector is read before it is written).
template <class S>
void gelu_tanh_backward(const float* x, const float* dy, int64_t count, float* dx) {
  map_binary<S>(x, dy, count, dx,
                [](typename S::V v, typename S::V d) { return S::mul(d, gelu_tanh_derivative_v<S>(v)); });
}
template <class S>
void gelu_erf_backward(const float* x, const float* dy, int64_t count, float* dx) {
  map_binary<S>(x, dy, count, dx,
                [](typename S::V v, typename S::V d) { return S::mul(d, gelu_erf_derivative_v<S>(v)); });
}
template <class S>
void silu(const float* x, int64_t count, float* y) {
  map_unary<S>(x, count, y, [](typename S::V v) { return times_sigmoid<S>(v, v); });
}
template <class S>
void swiglu(const float* gate, const float* up, int64_t count, float* y) {
  map_binary<S>(gate, up, count, y,
                [](typename S::V g, typename S::V u) { return S::mul(times_sigmoid<S>(g, g), u); });
}
template <class S>
void geglu(const float* gate, const float* up, int64_t count, float* y) {
  map_binary<S>(gate, up, count, y,
                [](typename S::V g, typename S::V u) { return S::mul(gelu_tanh_v<S>(g), u); });
}
// min(g, limit) sigmoid(alpha min(g, limit)) (clamp(u, -limit, limit) + 1), rounded as transformers'
// gpt-oss computes it: glu = g * sigmoid(g * alpha), then (u + 1) * glu.
template <class S>
void clamped_swiglu(const float* gate, const float* up, int64_t count, float alpha, float limit, float* y) {
  using V = typename S::V;
  const V a = S::set1(alpha), hi = S::set1(limit), lo = S::set1(-limit), one = S::set1(1.0f);
  map_binary<S>(gate, up, count, y, [&](V g, V u) {
    const V gc = S::min(g, hi);
    return S::mul(S::add(S::max(S::min(u, hi), lo), one), times_sigmoid<S>(gc, S::mul(gc, a)));
  });
}
template <class S>
void scale(const float* x, float factor, int64_t count, float* y) {
  const typename S::V f = S::set1(factor);
  map_unary<S>(x, count, y, [f](typename S::V v) { return S::mul(v, f); });
}
// cap tanh(x / cap) = cap (2 sigmoid(2 x / cap) - 1): -cap or cap where the exponential
// overflows, never NaN.
template <class S>
void softcap(const float* x, float cap, int64_t count, float* y) {
  const typename S::V c = S::set1(cap), two_over_c = S::set1(2.0f / cap), one = S::set1(1.0f);
  map_unary<S>(x, count, y, [=](typename S::V v) {
    const typename S::V s = times_sigmoid<S>(one, S::mul(v, two_over_c));
    return S::mul(c, S::sub(S::add(s, s), one));
  });
}
// y = silu(gate) up, s = sigmoid(gate):  dgate = dy up s (1 + gate (1 - s)),  dup = dy gate s.
// The outputs may be any of the inputs: each vector of all three is read before either is written.
template <class S>
void swiglu_backward(const float* gate, const float* up, const float* dy, int64_t count, float* dgate,
                     float* dup) {
  using V = typename S::V;
  const V one = S::set1(1.0f);
  for (int64_t i = 0; i < count; i += S::kWidth) {
    const int64_t lanes = count - i;
    const V g = load_n<S>(gate + i, lanes), u = load_n<S>(up + i, lanes), d = load_n<S>(dy + i, lanes);
    const V s = times_sigmoid<S>(one, g);
    const V d_s = S::mul(d, s);
    store_n<S>(dgate + i, S::mul(S::mul(d_s, u), S::fma(g, S::sub(one, s), one)), lanes);
    store_n<S>(dup + i, S::mul(d_s, g), lanes);
  }
}
// y = gelu_tanh(gate) up:  dgate = dy up gelu_tanh'(gate),  dup = dy gelu_tanh(gate); in place
// as swiglu_backward.
template <class S>
void geglu_backward(const float* gate, const float* up, const float* dy, int64_t count, float* dgate,
                    float* dup) {
  using V = typename S::V;
  for (int64_t i = 0; i < count; i += S::kWidth) {
    const int64_t lanes = count - i;
    const V g = load_n<S>(gate + i, lanes), u = load_n<S>(up + i, lanes), d = load_n<S>(dy + i, lanes);
    store_n<S>(dgate + i, S::mul(S::mul(d, u), gelu_tanh_derivative_v<S>(g)), lanes);
    store_n<S>(dup + i, S::mul(d, gelu_tanh_v<S>(g)), lanes);
  }
}
// dx = dy (1 - (y / cap)^2), y = softcap's output, as dy (cap - y) (cap + y) / cap^2: near
// saturation (|y| -> cap) cap - |y| is exact (Sterbenz), where 1 - (y / cap)^2 would cancel.
template <class S>
void softcap_backward(const float* y, float cap, const float* dy, int64_t count, float* dx) {
  const typename S::V c = S::set1(cap), inv_c2 = S::set1(1.0f / (cap * cap));
  map_binary<S>(y, dy, count, dx, [=](typename S::V v, typename S::V d) {
    return S::mul(S::mul(d, inv_c2), S::mul(S::sub(c, v), S::add(c, v)));
  });
}

template <class S>
void add(const float* a, const float* b, int64_t count, float* y) {
  map_binary<S>(a, b, count, y, [](typename S::V u, typename S::V v) { return S::add(u, v); });
}

// Sum over x[0, d) of f(x[i]) (f maps a vector; lanes past d are excluded), in four
// independent accumulators for speed and accuracy.
template <class S, class F>
float sum_over(const float* x, int64_t d, F f) {
  using V = typename S::V;
  constexpr int64_t W = S::kWidth;
  V acc[4] = {S::zero(), S::zero(), S::zero(), S::zero()};
  int64_t i = 0;
  for (; i + 4 * W <= d; i += 4 * W)
    for (int j = 0; j < 4; ++j) acc[j] = S::add(acc[j], f(S::load(x + i + j * W), W));
  for (; i < d; i += W) acc[0] = S::add(acc[0], f(load_n<S>(x + i, d - i), d - i));
  return S::reduce_add(S::add(S::add(acc[0], acc[1]), S::add(acc[2], acc[3])));
}

// Zeroes lanes [lanes, kWidth) of v (they hold a function of the zero fill).
template <class S>
typename S::V keep_lanes(typename S::V v, int64_t lanes) {
  if (lanes >= S::kWidth) return v;
  alignas(64) float tmp[S::kWidth];
  S::store(tmp, v);
  for (int64_t i = lanes; i < S::kWidth; ++i) tmp[i] = 0.0f;
  return S::load(tmp);
}

template <class S>
void rms_norm(const float* x, const float* weight, float eps, int64_t rows, int64_t d, float* y) {
  using V = typename S::V;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    float* yr = y + r * d;
    const float sum_sq = sum_over<S>(xr, d, [](V v, int64_t) { return S::mul(v, v); });
    const V inv = S::set1(1.0f / __builtin_sqrtf(sum_sq / static_cast<float>(d) + eps));
    for (int64_t i = 0; i < d; i += S::kWidth)
      store_n<S>(yr + i, S::mul(S::mul(load_n<S>(xr + i, d - i), inv), load_n<S>(weight + i, d - i)), d - i);
  }
}

template <class S>
void layer_norm(const float* x, const float* weight, const float* bias, float eps, int64_t rows, int64_t d,
                float* y) {
  using V = typename S::V;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    float* yr = y + r * d;
    const float mean = sum_over<S>(xr, d, [](V v, int64_t) { return v; }) / static_cast<float>(d);
    const V m = S::set1(mean);
    const float var = sum_over<S>(xr, d,
                                  [m](V v, int64_t lanes) {
                                    const V c = keep_lanes<S>(S::sub(v, m), lanes);
                                    return S::mul(c, c);
                                  }) /
                      static_cast<float>(d);
    const V inv = S::set1(1.0f / __builtin_sqrtf(var + eps));
    for (int64_t i = 0; i < d; i += S::kWidth) {
      const V c = S::mul(S::sub(load_n<S>(xr + i, d - i), m), inv);
      store_n<S>(yr + i, S::fma(c, load_n<S>(weight + i, d - i), load_n<S>(bias + i, d - i)), d - i);
    }
  }
}

// y = softmax(x) over one row of d >= 1 elements; y may equal x. A finite `sink` is one more
// logit in the softmax whose probability is dropped: m = max(x, sink), y_i = exp(x_i - m) /
// (sum_j exp(x_j - m) + exp(sink - m)) (attention sinks); -inf changes no bit of the plain softmax.
template <class S>
void softmax_row(const float* x, int64_t d, float* y, float sink = -__builtin_inff()) {
  using V = typename S::V;
  constexpr int64_t W = S::kWidth;
  V vmax = S::set1(-__builtin_inff());
  for (int64_t i = 0; i < d; i += W) vmax = S::max(vmax, load_n<S>(x + i, d - i, -__builtin_inff()));
  const float row_max = S::reduce_max(vmax);
  const float max = sink > row_max ? sink : row_max;
  const V m = S::set1(max);
  V sum = S::zero();
  for (int64_t i = 0; i < d; i += W) {
    const V e = keep_lanes<S>(exp<S>(S::sub(load_n<S>(x + i, d - i), m)), d - i);
    store_n<S>(y + i, e, d - i);
    sum = S::add(sum, e);
  }
  const float sink_term = sink == -__builtin_inff() ? 0.0f : std::exp(sink - max);
  const V inv = S::set1(1.0f / (S::reduce_add(sum) + sink_term));
  for (int64_t i = 0; i < d; i += W) store_n<S>(y + i, S::mul(load_n<S>(y + i, d - i), inv), d - i);
}

template <class S>
void softmax(const float* x, int64_t rows, int64_t d, float* y) {
  for (int64_t r = 0; r < rows; ++r) softmax_row<S>(x + r * d, d, y + r * d);
}

template <class S, DType D>
void convert_typed(const void* src, int64_t count, float* dst) {
  const auto* s = static_cast<const Storage<D>*>(src);
  for (int64_t i = 0; i < count; i += S::kWidth)
    store_n<S>(dst + i, load_w_n<S, D>(s + i, count - i), count - i);
}

template <class S>
void convert_to_f32(const void* src, DType dtype, int64_t count, float* dst) {
  switch (dtype) {
    case DType::F32: convert_typed<S, DType::F32>(src, count, dst); break;
    case DType::BF16: convert_typed<S, DType::BF16>(src, count, dst); break;
    case DType::F16: convert_typed<S, DType::F16>(src, count, dst); break;
    default: break;  // quantized types have their own kernels (the caller dispatches)
  }
}

// dst[0, count) = src rounded to `dtype` (F32, BF16, F16) exactly as store_from_f32 rounds it.
template <class S>
void convert_from_f32(const float* src, int64_t count, DType dtype, void* dst) {
  constexpr int64_t W = S::kWidth;
  if (dtype == DType::F32) {
    std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(float));
    return;
  }
  auto* h = static_cast<uint16_t*>(dst);
  const auto store = [&](uint16_t* p, typename S::V v) {
    if (dtype == DType::BF16) {
      S::store_bf16(p, v);
    } else {
      S::store_f16(p, v);
    }
  };
  int64_t i = 0;
  for (; i + W <= count; i += W) store(h + i, S::load(src + i));
  if (i < count) {  // the tail through one more vector (store_from_f32 is another header's inline)
    uint16_t tail[W];
    store(tail, load_n<S>(src + i, count - i));
    std::memcpy(h + i, tail, static_cast<size_t>(count - i) * sizeof(uint16_t));
  }
}

// ---------------------------------------------------------------- matmul: decode GEMV

// How far ahead of its loads a GEMV prefetches each stream of weights into L2.
inline constexpr int64_t kGemvPrefetchBytes = 4096;

// Rows a GEMV over NT tokens reads at once: 4, or 2 where the registers do not hold 4 (an
// accumulator per token and row, a vector of x per token, the weight vector, and two left
// for the compiler's temporaries): AVX2 at 3 or 4 tokens.
template <class S>
constexpr int gemv_streams(int nt) {
  return 4 * nt + nt + 1 <= S::kRegisters - 2 ? 4 : 2;
}

// y[t, row0 + s * stride] for t < NT, s < NS: the dot products of NT tokens with NS rows.
// Each sums its row's vectors in order in one accumulator, whatever the token count, the
// other rows and the thread split: a row's bits are independent of all three.
//
// gemv_tokens splits a thread's rows [m0, m1) into NS equal ranges and walks them side by
// side: NS sequential streams of w, each prefetched into L2 kGemvPrefetchBytes ahead of its
// loads, up to the end of its range (`stream_end`; the last stream's reaches the rows left
// over, not the next thread's). On a 2-core Xeon VM four such streams read f32 and 16-bit
// weights 10-90% faster than eight interleaved rows (the kernel before, many short streams;
// bench/RESULTS.md, 2026-12-05 06:43). Memory, not the accumulators' latency, bounds it: a
// stream takes 16 to 64 bytes of weights a step.
template <class S, DType D, int NT, int NS>
void gemv_rows(const MatmulArgs& a, int64_t row0, int64_t stride, const uintptr_t (&stream_end)[NS]) {
  using V = typename S::V;
  constexpr int64_t W = S::kWidth;
  constexpr int64_t kStepBytes = W * static_cast<int64_t>(sizeof(Storage<D>));
  const int64_t k = a.k;
  const Storage<D>* w[NS];
  V acc[NS][NT];
  for (int s = 0; s < NS; ++s) {
    w[s] = static_cast<const Storage<D>*>(a.w) + (row0 + s * stride) * k;
    for (int t = 0; t < NT; ++t) acc[s][t] = S::zero();
  }
  int64_t i = 0;
  for (; i + W <= k; i += W) {
    V xv[NT];
    for (int t = 0; t < NT; ++t) xv[t] = S::load(a.x + t * k + i);
    for (int s = 0; s < NS; ++s) {
      // An integer: past the range's end a pointer would be undefined behaviour.
      const uintptr_t ahead = reinterpret_cast<uintptr_t>(w[s] + i) + kGemvPrefetchBytes;
      if (ahead < stream_end[s] && ahead % 64 < kStepBytes)  // once per line
        _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T1);
      const V wv = load_w<S, D>(w[s] + i);
      for (int t = 0; t < NT; ++t) acc[s][t] = S::fma(xv[t], wv, acc[s][t]);
    }
  }
  if (i < k) {
    V xv[NT];
    for (int t = 0; t < NT; ++t) xv[t] = load_n<S>(a.x + t * k + i, k - i);
    for (int s = 0; s < NS; ++s) {
      const V wv = load_w_n<S, D>(w[s] + i, k - i);
      for (int t = 0; t < NT; ++t) acc[s][t] = S::fma(xv[t], wv, acc[s][t]);
    }
  }
  for (int s = 0; s < NS; ++s) {
    const int64_t row = row0 + s * stride;
    for (int t = 0; t < NT; ++t)
      a.y[t * a.m + row] = S::reduce_add(acc[s][t]) + (a.bias != nullptr ? a.bias[row] : 0.0f);
  }
}

template <class S, DType D, int NT>
void gemv_tokens(const MatmulArgs& a, int64_t m0, int64_t m1) {
  constexpr int NS = gemv_streams<S>(NT);
  const auto row_start = [&](int64_t r) {
    return reinterpret_cast<uintptr_t>(static_cast<const Storage<D>*>(a.w) + r * a.k);
  };
  const int64_t stride = (m1 - m0) / NS;
  uintptr_t stream_end[NS];
  for (int s = 0; s < NS; ++s) stream_end[s] = row_start(s + 1 < NS ? m0 + (s + 1) * stride : m1);
  for (int64_t r = m0; r < m0 + stride; ++r) gemv_rows<S, D, NT, NS>(a, r, stride, stream_end);
  const uintptr_t thread_end[1] = {row_start(m1)};
  for (int64_t r = m0 + NS * stride; r < m1; ++r) gemv_rows<S, D, NT, 1>(a, r, 0, thread_end);
}

template <class S, DType D>
void gemv_typed(const MatmulArgs& a, int64_t m0, int64_t m1) {
  static_assert(kGemvMaxTokens == 4);
  switch (a.n) {
    case 1: gemv_tokens<S, D, 1>(a, m0, m1); break;
    case 2: gemv_tokens<S, D, 2>(a, m0, m1); break;
    case 3: gemv_tokens<S, D, 3>(a, m0, m1); break;
    case 4: gemv_tokens<S, D, 4>(a, m0, m1); break;
    default: break;  // the caller routes larger n to the GEMM
  }
}

template <class S>
void gemv(const MatmulArgs& a, int64_t m0, int64_t m1) {
  switch (a.w_dtype) {
    case DType::F32: gemv_typed<S, DType::F32>(a, m0, m1); break;
    case DType::BF16: gemv_typed<S, DType::BF16>(a, m0, m1); break;
    case DType::F16: gemv_typed<S, DType::F16>(a, m0, m1); break;
    default: break;  // quantized types have their own kernels (the caller dispatches)
  }
}

// ---------------------------------------------------------------- matmul: prefill GEMM

template <class S>
int64_t gemm_packed_x_floats(int64_t tiles, int64_t k) {
  return tiles * S::kTileTokens * k;
}

template <class S>
int64_t gemm_panel_buffer_floats(int64_t /*k*/) {
  return kGemmBlockK * 2 * S::kWidth;
}

template <class S>
void gemm_pack_x(const MatmulArgs& a, int64_t tile0, int64_t tile1, float* packed) {
  constexpr int64_t T = S::kTileTokens;
  const int64_t k = a.k;
  for (int64_t b = tile0; b < tile1; ++b) {
    float* dst = packed + b * k * T;
    if (a.x_transposed) {  // x[token, i] = a.x[i * n + token]: T tokens are adjacent
      const int64_t tokens = a.n - b * T < T ? a.n - b * T : T;
      for (int64_t i = 0; i < k; ++i) {
        const float* src = a.x + i * a.n + b * T;
        for (int64_t t = 0; t < T; ++t) dst[i * T + t] = t < tokens ? src[t] : 0.0f;
      }
      continue;
    }
    for (int64_t t = 0; t < T; ++t) {
      const int64_t token = b * T + t;
      if (token < a.n) {
        const float* src = a.x + token * k;
        for (int64_t i = 0; i < k; ++i) dst[i * T + t] = src[i];
      } else {
        for (int64_t i = 0; i < k; ++i) dst[i * T + t] = 0.0f;
      }
    }
  }
}

// Converts w[r0 + r, k0 + i] for r < P = 2 kWidth, i < kc into panel[i * P + r] (f32),
// zero for rows past `rows`: kWidth x kWidth blocks, each transposed in registers.
template <class S, DType D>
void gemm_pack_panel(const Storage<D>* w, int64_t k, int64_t r0, int64_t rows, int64_t k0, int64_t kc,
                     float* panel) {
  using V = typename S::V;
  constexpr int64_t W = S::kWidth;
  constexpr int64_t P = 2 * W;
  for (int64_t half = 0; half < 2; ++half) {
    for (int64_t i = 0; i < kc; i += W) {
      V block[W];
      for (int64_t j = 0; j < W; ++j) {
        const int64_t r = half * W + j;
        block[j] = r < rows ? load_w_n<S, D>(w + (r0 + r) * k + k0 + i, kc - i) : S::zero();
      }
      S::transpose(block);
      const int64_t columns = kc - i < W ? kc - i : W;
      for (int64_t j = 0; j < columns; ++j) S::store(panel + (i + j) * P + half * W, block[j]);
    }
  }
}

// As gemm_pack_panel for w stored transposed ([k, m]): panel[i * P + r] = w[k0 + i, r0 + r],
// rows that lie side by side in memory.
template <class S, DType D>
void gemm_pack_panel_transposed(const Storage<D>* w, int64_t m, int64_t r0, int64_t rows, int64_t k0,
                                int64_t kc, float* panel) {
  constexpr int64_t W = S::kWidth;
  for (int64_t i = 0; i < kc; ++i) {
    const Storage<D>* src = w + (k0 + i) * m + r0;
    S::store(panel + i * 2 * W, load_w_n<S, D>(src, rows));
    S::store(panel + i * 2 * W + W, load_w_n<S, D>(src + W, rows - W));
  }
}

// The register-blocked micro-kernel: T tokens x P = 2 kWidth weight rows, k in [0, kc).
// xp: [kc][T] packed tokens; wp: [kc][P] packed panel. Starts from y (accumulate), bias
// or zero; writes tokens [0, tokens) and rows [0, rows) of the tile.
template <class S>
void gemm_tile(const float* xp, const float* wp, int64_t kc, float* y, int64_t ldy, int64_t tokens,
               int64_t rows, const float* bias, bool accumulate) {
  using V = typename S::V;
  constexpr int64_t W = S::kWidth;
  constexpr int T = S::kTileTokens;
  V acc[T][2];
  if (accumulate) {
    for (int t = 0; t < T; ++t) {
      acc[t][0] = t < tokens ? load_n<S>(y + t * ldy, rows) : S::zero();
      acc[t][1] = t < tokens ? load_n<S>(y + t * ldy + W, rows - W) : S::zero();
    }
  } else {
    const V b0 = bias != nullptr ? load_n<S>(bias, rows) : S::zero();
    const V b1 = bias != nullptr ? load_n<S>(bias + W, rows - W) : S::zero();
    for (int t = 0; t < T; ++t) {
      acc[t][0] = b0;
      acc[t][1] = b1;
    }
  }
  for (int64_t i = 0; i < kc; ++i) {
    const V w0 = S::load(wp + i * 2 * W);
    const V w1 = S::load(wp + i * 2 * W + W);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const V xb = S::set1(xp[i * T + t]);
      acc[t][0] = S::fma(xb, w0, acc[t][0]);
      acc[t][1] = S::fma(xb, w1, acc[t][1]);
    }
  }
  for (int t = 0; t < T; ++t) {
    if (t >= tokens) break;
    store_n<S>(y + t * ldy, acc[t][0], rows);
    store_n<S>(y + t * ldy + W, acc[t][1], rows - W);
  }
}

template <class S, DType D>
void gemm_panel_typed(const MatmulArgs& a, const float* packed, int64_t panel, int64_t tile0, int64_t tile1,
                      float* panel_buffer) {
  constexpr int64_t T = S::kTileTokens;
  constexpr int64_t P = 2 * S::kWidth;
  const int64_t r0 = panel * P;
  const int64_t rows = a.m - r0 < P ? a.m - r0 : P;
  const auto* w = static_cast<const Storage<D>*>(a.w);
  for (int64_t k0 = 0; k0 < a.k; k0 += kGemmBlockK) {
    const int64_t kc = a.k - k0 < kGemmBlockK ? a.k - k0 : kGemmBlockK;
    if (a.w_transposed) {
      gemm_pack_panel_transposed<S, D>(w, a.m, r0, rows, k0, kc, panel_buffer);
    } else {
      gemm_pack_panel<S, D>(w, a.k, r0, rows, k0, kc, panel_buffer);
    }
    const float* bias = k0 == 0 && a.bias != nullptr ? a.bias + r0 : nullptr;
    for (int64_t b = tile0; b < tile1; ++b) {
      const int64_t tokens = a.n - b * T < T ? a.n - b * T : T;
      gemm_tile<S>(packed + (b * a.k + k0) * T, panel_buffer, kc, a.y + b * T * a.m + r0, a.m, tokens, rows,
                   bias, k0 > 0 || a.accumulate);
    }
  }
}

template <class S>
void gemm_panel(const MatmulArgs& a, const float* packed, int64_t panel, int64_t tile0, int64_t tile1,
                float* panel_buffer) {
  switch (a.w_dtype) {
    case DType::F32: gemm_panel_typed<S, DType::F32>(a, packed, panel, tile0, tile1, panel_buffer); break;
    case DType::BF16: gemm_panel_typed<S, DType::BF16>(a, packed, panel, tile0, tile1, panel_buffer); break;
    case DType::F16: gemm_panel_typed<S, DType::F16>(a, packed, panel, tile0, tile1, panel_buffer); break;
    default: break;  // quantized types have their own kernels (the caller dispatches)
  }
}

}  // namespace
}  // namespace tokenmill::cpu
