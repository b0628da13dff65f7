// The model's normalisation (LayerNorm or RMSNorm, by config) through the Backend: one
// dispatch shared by the inference and the training passes.
#pragma once

#include "backend/backend.h"
#include "model/model_config.h"

namespace tokenmill {

// out = norm(x) * weight (+ bias for LayerNorm), eps = config.norm_eps.
void apply_norm(Backend& backend, const ModelConfig& config, const Tensor& x, const Tensor& weight,
                const Tensor& bias, const Tensor& out);
// Its backward: dx overwritten; dweight (and dbias for LayerNorm) accumulated.
void apply_norm_backward(Backend& backend, const ModelConfig& config, const Tensor& x, const Tensor& weight,
                         const Tensor& dy, const Tensor& dx, const Tensor& dweight, const Tensor& dbias);

}  // namespace tokenmill
