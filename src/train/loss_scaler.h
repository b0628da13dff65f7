// Dynamic loss scaling for FP16 training, with the state machine of PyTorch's GradScaler:
// the loss is multiplied by scale() before the backward pass; after it, if any gradient is
// inf or nan the optimizer step is skipped and scale *= backoff_factor; otherwise the
// gradients are divided by scale (Backend::AdamW::grad_scale) and, after growth_interval
// consecutive finite steps, scale *= growth_factor. BF16 and FP32 training do not scale
// (enabled = false: scale 1, every step taken).
#pragma once

#include <cstdint>

namespace tokenmill {

class LossScaler {
 public:
  struct Options {
    bool enabled = false;
    double init_scale = 65536.0, growth_factor = 2.0, backoff_factor = 0.5;
    int64_t growth_interval = 2000;
  };
  LossScaler() = default;
  explicit LossScaler(const Options& options);

  double scale() const { return scale_; }
  // Records one step's outcome; returns whether the optimizer step should be taken.
  bool update(bool found_inf_or_nan);

  // For checkpoints: the scale and the count of finite steps since the last change.
  int64_t growth_tracker() const { return growth_tracker_; }
  void restore(double scale, int64_t growth_tracker);

 private:
  Options options_;
  double scale_ = 1.0;
  int64_t growth_tracker_ = 0;
};

}  // namespace tokenmill
