// StepBatch: the micro-batches of one optimizer step, read ahead, and the weight of each
// micro-batch's loss in the step's.
//
// The step's loss is the mean cross-entropy over every target the whole step scores, as if
// all its micro-batches were one batch (Hugging Face's num_items_in_batch): micro-batch m
// scores n_m targets and its mean loss L_m enters with the weight n_m / N, N = sum of n_m.
// So --batch 8, --batch 4 --grad-accum 2 and --batch 2 --grad-accum 4 give the same loss and
// gradients also when loss masks (chat data) make n_m differ between micro-batches; a mean
// of the micro-batches' means would weigh a sparsely scored micro-batch's targets up.
// With several data-parallel ranks, every rank fills the whole global step (grad_accum x
// ranks micro-batches) and runs its own share of them, so N is the global count on every
// rank without communication (train/data_parallel.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "train/data_loader.h"

namespace tokenmill {

class StepBatch {
 public:
  StepBatch(int64_t micro_batches, int64_t batch, int64_t seq_len);

  // Reads the step's micro-batches from `loader`, in order.
  void fill(DataLoader& loader);

  int64_t micro_batches() const { return static_cast<int64_t>(scored_.size()); }
  // Micro-batch m's inputs and targets, [batch, seq_len] row-major (targets -1: not scored).
  std::span<const int32_t> inputs(int64_t m) const;
  std::span<const int32_t> targets(int64_t m) const;
  // The targets micro-batch m scores.
  int64_t scored(int64_t m) const { return scored_[static_cast<size_t>(m)]; }
  // n_m / N: the weight of micro-batch m's mean loss in the step's mean.
  double weight(int64_t m) const;

 private:
  int64_t micro_tokens_;
  std::vector<int32_t> inputs_, targets_;
  std::vector<int64_t> scored_;
  int64_t total_ = 0;
};

}  // namespace tokenmill
