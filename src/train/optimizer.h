// AdamW over ParameterBuffers (a model or a LoRA adapter) with global-norm gradient clipping
// (torch.nn.utils.clip_grad_norm_ then torch.optim.AdamW):
//   norm  = sqrt(sum over all parameters of (grad / loss_scale)^2)
//   clip  = min(1, max_norm / (norm + 1e-6))          (1 when max_norm <= 0: no clipping)
//   then Backend::adamw_step with grad_scale = clip / loss_scale over every parameter, and
//   the weight decay only where Parameter::decay says so (one step per run of consecutive
//   parameters with the same decay flag; the norm is one sum_squares over all gradients).
// ZeRO-1 (params holding a MomentShard): the gradients are valid on this rank's part only
// (train/zero.h); the norm is the sum of every rank's part (one all-reduce over `comm`), and
// the update touches this rank's part of the values only.
// A step whose gradients are not finite is not applied (the caller's LossScaler decides
// what happens next); the step counter (bias correction) advances only on applied steps.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "dist/communicator.h"
#include "train/parameters.h"

namespace tokenmill {

struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
  double max_grad_norm = 1.0;  // 0: no clipping

  // Throws Error naming the flag of a value out of range (NaN and infinities included).
  void validate() const;
};

class AdamWOptimizer {
 public:
  explicit AdamWOptimizer(const AdamWOptions& options);

  struct StepResult {
    double grad_norm = 0.0;  // before clipping, of the unscaled gradients (inf/nan if not finite)
    bool applied = false;
  };
  // Applies one step at learning rate lr, unless the gradients are not finite. `comm`: the
  // ranks whose parts make up the norm of sharded moments (unused when params holds them all).
  StepResult step(ParameterBuffers& params, Backend& backend, double lr, double loss_scale,
                  Communicator* comm = nullptr);

  int64_t steps_taken() const { return steps_; }
  void restore(int64_t steps_taken);

 private:
  AdamWOptions options_;
  int64_t steps_ = 0;
};

}  // namespace tokenmill
