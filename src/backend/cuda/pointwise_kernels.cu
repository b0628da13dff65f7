#include "backend/cuda/pointwise_kernels.h"

#include "backend/cuda/activation_math.h"
#include "backend/cuda/grid_stride.cuh"

namespace tokenmill::cuda {

namespace {

// The per-element bodies. No __restrict__: outputs may be inputs.
struct Gelu {
  const float* x;
  float* y;
  bool tanh_form;
  __device__ void operator()(int64_t i) const { y[i] = gelu(x[i], tanh_form); }
};

struct Silu {
  const float* x;
  float* y;
  __device__ void operator()(int64_t i) const { y[i] = silu(x[i]); }
};

struct Swiglu {
  const float *gate, *up;
  float* y;
  __device__ void operator()(int64_t i) const { y[i] = swiglu(gate[i], up[i]); }
};

struct ClampedSwiglu {
  const float *gate, *up;
  float alpha, limit;
  float* y;
  __device__ void operator()(int64_t i) const { y[i] = clamped_swiglu(gate[i], up[i], alpha, limit); }
};

struct Geglu {
  const float *gate, *up;
  float* y;
  __device__ void operator()(int64_t i) const { y[i] = gelu_tanh(gate[i]) * up[i]; }
};

struct Scale {
  const float* x;
  float factor;
  float* y;
  __device__ void operator()(int64_t i) const { y[i] = factor * x[i]; }
};

struct Softcap {
  const float* x;
  float cap;
  float* y;
  __device__ void operator()(int64_t i) const { y[i] = cap * tanhf(x[i] / cap); }
};

struct Add {
  const float *a, *b;
  float* y;
  __device__ void operator()(int64_t i) const { y[i] = a[i] + b[i]; }
};

struct GeluBackward {
  const float *x, *dy;
  float* dx;
  bool tanh_form;
  __device__ void operator()(int64_t i) const { dx[i] = dy[i] * gelu_derivative(x[i], tanh_form); }
};

struct GatedBackward {
  const float *gate, *up, *dy;
  float *dgate, *dup;
  bool geglu;
  __device__ void operator()(int64_t i) const {
    // all inputs read before either store
    const SwigluGrads g = geglu ? geglu_grads(gate[i], up[i], dy[i]) : swiglu_grads(gate[i], up[i], dy[i]);
    dgate[i] = g.dgate;
    dup[i] = g.dup;
  }
};

struct SoftcapBackward {
  const float *y, *dy;
  float cap;
  float* dx;
  __device__ void operator()(int64_t i) const { dx[i] = softcap_gradient(y[i], cap, dy[i]); }
};

}  // namespace

void launch_gelu(const float* x, bool tanh_form, int64_t count, float* y, cudaStream_t stream) {
  launch_elementwise(count, Gelu{x, y, tanh_form}, stream);
}

void launch_silu(const float* x, int64_t count, float* y, cudaStream_t stream) {
  launch_elementwise(count, Silu{x, y}, stream);
}

void launch_swiglu(const float* gate, const float* up, int64_t count, float* y, cudaStream_t stream) {
  launch_elementwise(count, Swiglu{gate, up, y}, stream);
}

void launch_clamped_swiglu(const float* gate, const float* up, int64_t count, float alpha, float limit,
                           float* y, cudaStream_t stream) {
  launch_elementwise(count, ClampedSwiglu{gate, up, alpha, limit, y}, stream);
}

void launch_geglu(const float* gate, const float* up, int64_t count, float* y, cudaStream_t stream) {
  launch_elementwise(count, Geglu{gate, up, y}, stream);
}

void launch_scale(const float* x, float factor, int64_t count, float* y, cudaStream_t stream) {
  launch_elementwise(count, Scale{x, factor, y}, stream);
}

void launch_softcap(const float* x, float cap, int64_t count, float* y, cudaStream_t stream) {
  launch_elementwise(count, Softcap{x, cap, y}, stream);
}

void launch_add(const float* a, const float* b, int64_t count, float* y, cudaStream_t stream) {
  launch_elementwise(count, Add{a, b, y}, stream);
}

void launch_gelu_backward(const float* x, bool tanh_form, const float* dy, int64_t count, float* dx,
                          cudaStream_t stream) {
  launch_elementwise(count, GeluBackward{x, dy, dx, tanh_form}, stream);
}

void launch_gated_backward(bool geglu, const float* gate, const float* up, const float* dy, int64_t count,
                           float* dgate, float* dup, cudaStream_t stream) {
  launch_elementwise(count, GatedBackward{gate, up, dy, dgate, dup, geglu}, stream);
}

void launch_softcap_backward(const float* y, float cap, const float* dy, int64_t count, float* dx,
                             cudaStream_t stream) {
  launch_elementwise(count, SoftcapBackward{y, dy, cap, dx}, stream);
}

}  // namespace tokenmill::cuda
