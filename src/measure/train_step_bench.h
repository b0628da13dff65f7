// The train phase of `tokenmill bench`: full training steps as `tokenmill train` runs them
// (train/trainer.cpp): zero the gradients, TrainingPass::forward_backward over a batch of
// sequences (model/training_pass.h), one AdamW step (train/optimizer.h) on the f32 master
// copy, in `precision`: FP32, or BF16 with the matrices multiplied as a bf16 copy rounded from
// the master after every step (train/compute_weights.h, as `tokenmill train --precision bf16`;
// fp16 would need the loss scaler, which a throughput figure leaves out, and is an Error).
// The inputs are seeded random in-vocabulary ids, the targets the inputs shifted by one.
// One untimed warm-up step (first touch of the activations, gradients and moments), then
// `steps` timed ones, ended by a copy to the host (on a GPU, the clock stops when the last
// step has finished); the phase reports one step: its tokens, FLOPs and bytes, and the mean
// time of the timed steps. The parameters may live in the backend's memory.
//
// FLOPs: training_flops per sequence (measure/flops.h: 3 x forward, every token's logits);
// AdamW's few operations per parameter are left out. Bytes: training_step_bytes
// (measure/traffic.h).
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "measure/bench_runner.h"
#include "model/training_pass.h"
#include "train/parameters.h"
#include "train/precision.h"

namespace tokenmill {

struct TrainStepOptions {
  int64_t batch = 1;    // sequences per step
  int64_t seq_len = 0;  // tokens per sequence
  int64_t steps = 2;    // timed
  uint64_t seed = 1234;
  Precision precision = Precision::FP32;  // FP32 or BF16
};

class TrainStepBench {
 public:
  // Builds the TrainingPass; its activation buffers are allocated but not touched until run().
  TrainStepBench(const ModelConfig& config, Backend& backend, const TrainStepOptions& options);

  uint64_t activation_bytes() const { return pass_.activation_bytes(); }

  // Runs the steps on `params` (whose values they update). Error if a loss is not finite.
  PhaseMeasurement run(ParameterSet& params);

 private:
  const ModelConfig& config_;
  Backend& backend_;
  TrainStepOptions options_;
  TrainingPass pass_;
};

}  // namespace tokenmill
