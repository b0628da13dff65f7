#include "train/optimizer.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tokenmill {

namespace {

// Floats [offset, offset + count) of the flat buffers.
struct Range {
  int64_t offset, count;
};

Tensor flat(std::span<float> buffer, Range r) {
  return Tensor(buffer.data() + r.offset, DType::F32, {r.count});
}

}  // namespace

void AdamWOptions::validate() const {
  if (!(beta1 >= 0.0 && beta1 < 1.0) || !(beta2 >= 0.0 && beta2 < 1.0))
    fail("--beta1 and --beta2 must be in [0, 1), got {} and {}", beta1, beta2);
  if (!(eps > 0.0) || !std::isfinite(eps)) fail("--adam-eps must be a positive number, got {}", eps);
  if (!(weight_decay >= 0.0) || !std::isfinite(weight_decay))
    fail("--weight-decay must be a number >= 0, got {}", weight_decay);
  if (!(max_grad_norm >= 0.0) || !std::isfinite(max_grad_norm))
    fail("--max-grad-norm must be a number >= 0 (0: no clipping), got {}", max_grad_norm);
}

AdamWOptimizer::AdamWOptimizer(const AdamWOptions& options) : options_(options) { options.validate(); }

AdamWOptimizer::StepResult AdamWOptimizer::step(ParameterBuffers& params, Backend& backend, double lr,
                                                double loss_scale, Communicator* comm) {
  // The parameters tile the gradient buffer: one reduction over all of it (one round trip
  // to a GPU, not one per parameter), or over this rank's part and then over the ranks.
  const Range part{params.moments_begin(), params.moments_end() - params.moments_begin()};
  const bool sharded = part.count != params.count();
  if (sharded && comm == nullptr)
    fail("training: sharded AdamW moments need the communicator of their ranks");
  double sum = part.count == 0 ? 0.0 : backend.sum_squares(flat(params.gradients(), part));
  if (sharded) comm->all_reduce_sum(std::span(&sum, 1), "the gradient norm");
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
  // The update is elementwise: each run of consecutive parameters with the same decay flag
  // (one range of the buffers), cut to the part whose moments params holds, is one step.
  const std::vector<Parameter>& all = params.parameters();
  for (size_t first = 0, end = 0; first < all.size(); first = end) {
    for (end = first + 1; end < all.size() && all[end].decay == all[first].decay;) ++end;
    const int64_t begin = std::max(all[first].offset, part.offset);
    const int64_t stop = std::min(all[end - 1].offset + all[end - 1].numel, part.offset + part.count);
    if (begin >= stop) continue;
    const Range run{begin, stop - begin}, moments{begin - part.offset, stop - begin};
    hyper.weight_decay = all[first].decay ? static_cast<float>(options_.weight_decay) : 0.0f;
    backend.adamw_step(flat(params.values(), run), flat(params.gradients(), run),
                       flat(params.first_moments(), moments), flat(params.second_moments(), moments), hyper);
  }
  result.applied = true;
  return result;
}

void AdamWOptimizer::restore(int64_t steps_taken) {
  if (steps_taken < 0) fail("checkpoint: optimizer step count {} is negative", steps_taken);
  steps_ = steps_taken;
}

}  // namespace tokenmill
