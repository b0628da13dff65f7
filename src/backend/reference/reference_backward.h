// The float64 reference of every backward op of the Backend interface (and of the loss
// and the AdamW step): plain loops, obviously correct, slow. Same conventions as
// reference_ops.h: inputs of any dtype read through element(), arithmetic in double,
// results returned as row-major vectors in the shape of each output. Parameter-gradient
// results are the gradient alone (what the backend adds to its accumulator).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/tensor.h"

namespace tokenmill::reference {

struct MatmulGrads {
  std::vector<double> dx, dw, db;  // [n, k], [m, k], [m]
};
MatmulGrads matmul_backward(const Tensor& x, const Tensor& w, const Tensor& dy);

// [vocab, d]: the sum of dout's rows per id.
std::vector<double> embedding_backward(std::span<const int32_t> ids, const Tensor& dout, int64_t vocab);

struct NormGrads {
  std::vector<double> dx, dweight, dbias;  // dbias empty for rms_norm
};
NormGrads rms_norm_backward(const Tensor& x, const Tensor& weight, float eps, const Tensor& dy);
NormGrads layer_norm_backward(const Tensor& x, const Tensor& weight, float eps, const Tensor& dy);

std::vector<double> gelu_backward(const Tensor& x, GeluForm form, const Tensor& dy);

struct GatedGrads {
  std::vector<double> dgate, dup;
};
GatedGrads swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy);
GatedGrads geglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy);

// From softcap's output y: dy (1 - (y / cap)^2).
std::vector<double> softcap_backward(const Tensor& y, float cap, const Tensor& dy);

std::vector<double> rope_backward(const Tensor& dx, std::span<const int32_t> positions,
                                  const Tensor& inv_freq, RopeLayout layout, float magnitude);

struct AttentionGrads {
  std::vector<double> dq, dk, dv;
};
AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
                                  AttentionScores scores);

struct CrossEntropy {
  std::vector<double> losses, dlogits;  // [n], [n, vocab]
};
CrossEntropy cross_entropy(const Tensor& logits, std::span<const int32_t> targets, double grad_scale);

double sum_squares(const Tensor& x);

struct AdamWState {
  std::vector<double> param, m, v;
};
AdamWState adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                      const Backend::AdamW& hyper);

}  // namespace tokenmill::reference
