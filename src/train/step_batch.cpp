#include "train/step_batch.h"

#include <algorithm>

namespace tokenmill {

StepBatch::StepBatch(int64_t micro_batches, int64_t batch, int64_t seq_len)
    : micro_tokens_(batch * seq_len),
      inputs_(static_cast<size_t>(micro_batches * micro_tokens_)),
      targets_(inputs_.size()),
      scored_(static_cast<size_t>(micro_batches)) {}

void StepBatch::fill(DataLoader& loader) {
  const int64_t batch = micro_tokens_ / loader.seq_len();
  total_ = 0;
  for (int64_t m = 0; m < micro_batches(); ++m) {
    const auto at = static_cast<size_t>(m * micro_tokens_);
    const auto n = static_cast<size_t>(micro_tokens_);
    loader.next_batch(batch, std::span(inputs_).subspan(at, n), std::span(targets_).subspan(at, n));
    const auto t = std::span<const int32_t>(targets_).subspan(at, n);
    scored_[static_cast<size_t>(m)] = std::count_if(t.begin(), t.end(), [](int32_t id) { return id >= 0; });
    total_ += scored_[static_cast<size_t>(m)];
  }
}

std::span<const int32_t> StepBatch::inputs(int64_t m) const {
  return std::span(inputs_).subspan(static_cast<size_t>(m * micro_tokens_),
                                    static_cast<size_t>(micro_tokens_));
}

std::span<const int32_t> StepBatch::targets(int64_t m) const {
  return std::span(targets_).subspan(static_cast<size_t>(m * micro_tokens_),
                                     static_cast<size_t>(micro_tokens_));
}

double StepBatch::weight(int64_t m) const {
  return static_cast<double>(scored(m)) / static_cast<double>(total_);
}

}  // namespace tokenmill
