// Launchers of the elementwise kernels (gelu, silu, swiglu, add and the activations'
// backward) on f32 device arrays of `count` elements. Arguments are checked by the caller
// (backend/checks/layer_checks.h). An output may be exactly one of the inputs (in place):
// each element's inputs are read before its outputs are written.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tokenmill::cuda {

void launch_gelu(const float* x, bool tanh_form, int64_t count, float* y, cudaStream_t stream);
void launch_silu(const float* x, int64_t count, float* y, cudaStream_t stream);
void launch_swiglu(const float* gate, const float* up, int64_t count, float* y, cudaStream_t stream);
void launch_geglu(const float* gate, const float* up, int64_t count, float* y, cudaStream_t stream);
void launch_clamped_swiglu(const float* gate, const float* up, int64_t count, float alpha, float limit,
                           float* y, cudaStream_t stream);
void launch_scale(const float* x, float factor, int64_t count, float* y, cudaStream_t stream);
void launch_softcap(const float* x, float cap, int64_t count, float* y, cudaStream_t stream);
void launch_add(const float* a, const float* b, int64_t count, float* y, cudaStream_t stream);

// dx = dy * gelu'(x).
void launch_gelu_backward(const float* x, bool tanh_form, const float* dy, int64_t count, float* dx,
                          cudaStream_t stream);
// dgate, dup of y = silu(gate) * up, or with `geglu` of y = gelu_tanh(gate) * up.
void launch_gated_backward(bool geglu, const float* gate, const float* up, const float* dy, int64_t count,
                           float* dgate, float* dup, cudaStream_t stream);
// dx = dy * (1 - (y / cap)^2), y = softcap's output.
void launch_softcap_backward(const float* y, float cap, const float* dy, int64_t count, float* dx,
                             cudaStream_t stream);

}  // namespace tokenmill::cuda
