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

void apply_norm_backward(Backend& backend, const ModelConfig& config, const Tensor& x, const Tensor& weight,
                         const Tensor& dy, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  const auto eps = static_cast<float>(config.norm_eps);
  if (config.norm == NormKind::LayerNorm) {
    backend.layer_norm_backward(x, weight, eps, dy, dx, dweight, dbias);
  } else {
    backend.rms_norm_backward(x, weight, eps, dy, dx, dweight);
  }
}

}  // namespace tokenmill
