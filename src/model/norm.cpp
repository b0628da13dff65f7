#include "model/norm.h"

namespace tokenmill {

void apply_norm(Backend& backend, const ModelConfig& config, const Tensor& x, const Tensor& weight,
                const Tensor& bias, const Tensor& out) {
  const auto eps = static_cast<float>(config.norm_eps);
  if (config.norm == NormKind::LayerNorm) {
    backend.layer_norm(x, weight, bias, eps, out);
  } else {
    backend.rms_norm(x, weight, eps, out);
  }
}

void apply_add_norm(Backend& backend, const ModelConfig& config, const Tensor& a, const Tensor& b,
                    const Tensor& sum, const Tensor& weight, const Tensor& bias, const Tensor& out) {
  const auto eps = static_cast<float>(config.norm_eps);
  if (config.norm == NormKind::LayerNorm) {
    backend.add_layer_norm(a, b, sum, weight, bias, eps, out);
  } else {
    backend.add_rms_norm(a, b, sum, weight, eps, out);
  }
}

void apply_norm_backward(Backend& backend, const ModelConfig& config, const Tensor& x, const Tensor& weight,
                         const Tensor& dy, const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                         GradWrite dx_write) {
  const auto eps = static_cast<float>(config.norm_eps);
  if (config.norm == NormKind::LayerNorm) {
    backend.layer_norm_backward(x, weight, eps, dy, dx, dweight, dbias, dx_write);
  } else {
    backend.rms_norm_backward(x, weight, eps, dy, dx, dweight, dx_write);
  }
}

}  // namespace tokenmill
