// Learning-rate schedules: linear warmup from 0, then cosine, linear or constant decay to
// min_lr at total_steps (and min_lr after it). Steps count from 1 (the first optimizer step).
//   warmup (step <= warmup_steps):  lr = max_lr * step / warmup_steps
//   progress p = (step - warmup_steps) / (total_steps - warmup_steps), clamped to [0, 1]
//   cosine:    lr = min_lr + (max_lr - min_lr) * 0.5 * (1 + cos(pi * p))
//   linear:    lr = max_lr + (min_lr - max_lr) * p
//   constant:  lr = max_lr
#pragma once

#include <cstdint>
#include <string_view>

namespace tokenmill {

enum class LrDecay : uint8_t { Cosine, Linear, Constant };

struct LrSchedule {
  double max_lr = 3e-4, min_lr = 3e-5;
  int64_t warmup_steps = 0, total_steps = 1;
  LrDecay decay = LrDecay::Cosine;

  // Throws Error for max_lr <= 0, min_lr outside [0, max_lr], negative warmup, a warmup
  // longer than total_steps, or total_steps < 1 (flags named as the CLI spells them).
  void validate() const;
  double at(int64_t step) const;
};

// "cosine" | "linear" | "constant"; throws Error naming the flag otherwise.
LrDecay parse_lr_decay(std::string_view name);
std::string_view lr_decay_name(LrDecay decay);

}  // namespace tokenmill
