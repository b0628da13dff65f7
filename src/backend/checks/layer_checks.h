// Argument checks of the layer ops (norms, activations, add, RoPE, softmax and their
// backward), shared by every backend so that all of them refuse the same calls with the same
// words. Each throws Error (core/error.h) and returns the dimensions the op needs.
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"

namespace tokenmill::checks {

// Rows of a row-wise op: x, y [rows, d].
struct RowDims {
  int64_t rows = 0, d = 0;
};

// softmax: x, y f32 with the same rows; y is x or disjoint from it.
RowDims check_rows(const char* op, const Tensor& x, const Tensor& y);
// rms_norm (bias null), layer_norm: check_rows, plus weight (and bias) [d] of any dtype with data.
RowDims check_norm(const char* op, const Tensor& x, const Tensor& weight, const Tensor* bias,
                   const Tensor& y);
// add_rms_norm (bias null), add_layer_norm: check_binary(a, b, sum), check_norm(sum, ...), and
// y disjoint from a, b and sum.
RowDims check_add_norm(const char* op, const Tensor& a, const Tensor& b, const Tensor& sum,
                       const Tensor& weight, const Tensor* bias, const Tensor& y);
// The norms' backward: x, dy, dx [rows, d] f32, weight [d] any dtype, dweight (and dbias when
// not null) f32 [d]; no output overlaps an input or another output.
RowDims check_norm_backward(const char* op, const Tensor& x, const Tensor& weight, const Tensor& dy,
                            const Tensor& dx, const Tensor& dweight, const Tensor* dbias);

// Elementwise y = f(x) (gelu, silu): f32, same element count, y is x or disjoint. Returns the count.
int64_t check_unary(const char* op, const Tensor& x, const Tensor& y);
// softcap's cap: finite and > 0.
void check_softcap(float cap);
// clamped_swiglu's parameters: alpha finite, limit finite and > 0.
void check_clamped_swiglu(float alpha, float limit);
// softcap_backward: the cap as softcap's; y, dy, dx f32 of one element count, dx is y, dy or disjoint.
int64_t check_softcap_backward(float cap, const Tensor& y, const Tensor& dy, const Tensor& dx);
// Elementwise y = f(a, b) (swiglu, add): f32, same element count, y is a, b or disjoint.
int64_t check_binary(const char* op, const Tensor& a, const Tensor& b, const Tensor& y);
// gelu_backward: x, dy, dx f32 of one element count; dx may be dy (not x).
int64_t check_gelu_backward(const char* op, const Tensor& x, const Tensor& dy, const Tensor& dx);
// swiglu_backward: all f32 of one element count; dgate, dup distinct, each may be an input.
int64_t check_swiglu_backward(const char* op, const Tensor& gate, const Tensor& up, const Tensor& dy,
                              const Tensor& dgate, const Tensor& dup);

// RoPE over x [n, heads, head_dim] (named `name` in messages), in place.
struct RopeDims {
  int64_t n = 0, heads = 0, head_dim = 0;
  int64_t half = 0;  // pairs rotated per head: rotary_dim / 2 = inv_freq.numel()
};
// x, inv_freq f32, x of rank 3, one position per row, 2 * half <= head_dim, x disjoint from
// inv_freq, a finite magnitude > 0.
RopeDims check_rope(const char* op, const char* name, const Tensor& x, std::span<const int32_t> positions,
                    const Tensor& inv_freq, float magnitude);

}  // namespace tokenmill::checks
