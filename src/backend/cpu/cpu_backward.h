// The CPU backend's training ops (the backward half of backend.h): shapes checked like the
// forward ops (a mismatch throws Error), multi-threaded with core/parallel.h, f32 math
// (sums of many terms in double or in a fixed blocked order, so results do not depend on
// the thread count). CpuBackend forwards its overrides here.
#pragma once

#include <cstdint>
#include <span>

#include "backend/backend.h"
#include "backend/cpu/kernels.h"

namespace tokenmill::cpu {

// backward_linear.cpp. The products run on `kernels`' packed GEMM (cpu_gemm.h).
void matmul_backward(const KernelTable& kernels, const Tensor& x, const Tensor& w, const Tensor& dy,
                     const Tensor* dx, const Tensor* dw, const Tensor* db);
void embedding_backward(std::span<const int32_t> ids, const Tensor& dout, const Tensor& dtable);
void cross_entropy(const Tensor& logits, std::span<const int32_t> targets, float grad_scale,
                   const Tensor& losses, const Tensor* dlogits);
double sum_squares(const Tensor& x);
void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                const Backend::AdamW& hyper);

// backward_layers.cpp.
void rms_norm_backward(const Tensor& x, const Tensor& weight, float eps, const Tensor& dy, const Tensor& dx,
                       const Tensor& dweight, GradWrite dx_write);
void layer_norm_backward(const Tensor& x, const Tensor& weight, float eps, const Tensor& dy, const Tensor& dx,
                         const Tensor& dweight, const Tensor& dbias, GradWrite dx_write);
void gelu_backward(const KernelTable& kernels, const Tensor& x, GeluForm form, const Tensor& dy,
                   const Tensor& dx);
// Of swiglu or geglu, as `unit` says.
enum class GatedUnit : uint8_t { SwiGlu, GeGlu };
void gated_backward(const KernelTable& kernels, GatedUnit unit, const Tensor& gate, const Tensor& up,
                    const Tensor& dy, const Tensor& dgate, const Tensor& dup);
void softcap_backward(const KernelTable& kernels, const Tensor& y, float cap, const Tensor& dy,
                      const Tensor& dx);
void rope_backward(const Tensor& dx, std::span<const int32_t> positions, const Tensor& inv_freq,
                   RopeLayout layout, float magnitude);
void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& dout, AttentionScores scores, const Tensor& dq, const Tensor& dk,
                        const Tensor& dv);

}  // namespace tokenmill::cpu
