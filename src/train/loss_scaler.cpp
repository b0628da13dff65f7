#include "train/loss_scaler.h"

#include <cmath>

#include "core/error.h"

namespace tokenmill {

LossScaler::LossScaler(const Options& options)
    : options_(options), scale_(options.enabled ? options.init_scale : 1.0) {
  if (options.enabled &&
      (!(options.init_scale > 0.0) || !(options.growth_factor > 1.0) ||
       !(options.backoff_factor > 0.0 && options.backoff_factor < 1.0) || options.growth_interval < 1))
    fail(
        "loss scaler: need init_scale > 0, growth_factor > 1, backoff_factor in (0, 1), growth_interval >= "
        "1");
}

bool LossScaler::update(bool found_inf_or_nan) {
  if (!options_.enabled) return !found_inf_or_nan;
  if (found_inf_or_nan) {
    scale_ *= options_.backoff_factor;
    growth_tracker_ = 0;
    return false;
  }
  if (++growth_tracker_ == options_.growth_interval) {
    scale_ *= options_.growth_factor;
    growth_tracker_ = 0;
  }
  return true;
}

void LossScaler::restore(double scale, int64_t growth_tracker) {
  if (!(scale > 0.0) || !std::isfinite(scale) || growth_tracker < 0 ||
      (options_.enabled && growth_tracker >= options_.growth_interval) || (!options_.enabled && scale != 1.0))
    fail("checkpoint: loss scaler state (scale {}, growth tracker {}) is not valid for this run", scale,
         growth_tracker);
  scale_ = scale;
  growth_tracker_ = growth_tracker;
}

}  // namespace tokenmill
