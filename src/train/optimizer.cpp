#include "train/optimizer.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tokenmill {

namespace {

Tensor flat(std::span<float> buffer, const Parameter& p) {
  return Tensor(buffer.data() + p.offset, DType::F32, {p.numel});
}

}  // namespace

AdamWOptimizer::AdamWOptimizer(const AdamWOptions& options) : options_(options) {
  if (!(options.beta1 >= 0.0 && options.beta1 < 1.0) || !(options.beta2 >= 0.0 && options.beta2 < 1.0))
    fail("--beta1 and --beta2 must be in [0, 1), got {} and {}", options.beta1, options.beta2);
  if (!(options.eps > 0.0)) fail("--adam-eps must be positive, got {}", options.eps);
  if (!(options.weight_decay >= 0.0)) fail("--weight-decay must be >= 0, got {}", options.weight_decay);
}

AdamWOptimizer::StepResult AdamWOptimizer::step(ParameterBuffers& params, Backend& backend, double lr,
                                                double loss_scale) {
  double sum = 0.0;
  for (const Parameter& p : params.parameters()) sum += backend.sum_squares(flat(params.gradients(), p));
  StepResult result;
  result.grad_norm = std::sqrt(sum) / loss_scale;
  if (!std::isfinite(result.grad_norm)) return result;
  const double clip =
      options_.max_grad_norm > 0.0 ? std::min(1.0, options_.max_grad_norm / (result.grad_norm + 1e-6)) : 1.0;
  ++steps_;
  Backend::AdamW hyper;
  hyper.lr = static_cast<float>(lr);
  hyper.beta1 = static_cast<float>(options_.beta1);
  hyper.beta2 = static_cast<float>(options_.beta2);
  hyper.eps = static_cast<float>(options_.eps);
  hyper.step = steps_;
  hyper.grad_scale = static_cast<float>(clip / loss_scale);
  for (const Parameter& p : params.parameters()) {
    hyper.weight_decay = p.decay ? static_cast<float>(options_.weight_decay) : 0.0f;
    backend.adamw_step(flat(params.values(), p), flat(params.gradients(), p), flat(params.first_moments(), p),
                       flat(params.second_moments(), p), hyper);
  }
  result.applied = true;
  return result;
}

void AdamWOptimizer::restore(int64_t steps_taken) {
  if (steps_taken < 0) fail("checkpoint: optimizer step count {} is negative", steps_taken);
  steps_ = steps_taken;
}

}  // namespace tokenmill
