// The model's normalisation (LayerNorm or RMSNorm, by config) through the Backend: one
// dispatch shared by the inference and the training passes.
#pragma once

#include "backend/backend.h"
#include "model/model_config.h"

namespace tokenmill {

// out = norm(x) * weight (+ bias for LayerNorm), eps = config.norm_eps.
void apply_norm(Backend& backend, const ModelConfig& config, const Tensor& x, const Tensor& weight,
                const Tensor& bias, const Tensor& out);
// The residual step and the norm after it, fused: sum = a + b (sum may be a or b), then
// out = norm(sum).
void apply_add_norm(Backend& backend, const ModelConfig& config, const Tensor& a, const Tensor& b,
                    const Tensor& sum, const Tensor& weight, const Tensor& bias, const Tensor& out);
// apply_norm's backward: dx written as dx_write says; dweight (and dbias for LayerNorm) accumulated.
void apply_norm_backward(Backend& backend, const ModelConfig& config, const Tensor& x, const Tensor& weight,
                         const Tensor& dy, const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                         GradWrite dx_write);

}  // namespace tokenmill
