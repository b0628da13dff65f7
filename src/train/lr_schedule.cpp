#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace tokenmill {

void LrSchedule::validate() const {
  if (!(max_lr > 0.0) || !std::isfinite(max_lr)) fail("--lr must be a positive number, got {}", max_lr);
  if (!(min_lr >= 0.0 && min_lr <= max_lr))
    fail("--min-lr must be in [0, --lr = {}], got {}", max_lr, min_lr);
  if (warmup_steps < 0) fail("--warmup-steps must be >= 0, got {}", warmup_steps);
  if (total_steps < 1) fail("--steps must be >= 1, got {}", total_steps);
  if (warmup_steps > total_steps)
    fail("--warmup-steps ({}) is longer than the run (--steps {}): the learning rate would never reach --lr",
         warmup_steps, total_steps);
}

double LrSchedule::at(int64_t step) const {
  if (step <= warmup_steps) return max_lr * static_cast<double>(step) / static_cast<double>(warmup_steps);
  if (decay == LrDecay::Constant) return max_lr;
  const int64_t span = total_steps - warmup_steps;
  const double p =
      span <= 0 ? 1.0
                : std::clamp(static_cast<double>(step - warmup_steps) / static_cast<double>(span), 0.0, 1.0);
  if (decay == LrDecay::Linear) return max_lr + (min_lr - max_lr) * p;
  return min_lr + (max_lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * p));
}

std::string_view lr_decay_name(LrDecay decay) {
  switch (decay) {
    case LrDecay::Cosine: return "cosine";
    case LrDecay::Linear: return "linear";
    case LrDecay::Constant: return "constant";
  }
  return "cosine";
}

LrDecay parse_lr_decay(std::string_view name) {
  if (name == "cosine") return LrDecay::Cosine;
  if (name == "linear") return LrDecay::Linear;
  if (name == "constant") return LrDecay::Constant;
  fail("--lr-decay must be cosine, linear or constant, got '{}'", name);
}

}  // namespace tokenmill
