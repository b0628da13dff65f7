#include "measure/train_step_bench.h"

#include <chrono>
#include <cmath>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "core/error.h"
#include "measure/flops.h"
#include "measure/traffic.h"
#include "train/compute_weights.h"
#include "train/optimizer.h"

namespace tokenmill {

namespace {

constexpr double kLearningRate = 1e-4;  // any: the figures do not depend on it

}  // namespace

TrainStepBench::TrainStepBench(const ModelConfig& config, Backend& backend, const TrainStepOptions& options)
    : config_(config),
      backend_(backend),
      options_(options),
      pass_(config, backend, options.batch, options.seq_len) {
  if (options.steps < 1) fail("bench: the train phase needs at least one timed step (got {})", options.steps);
  if (options.precision == Precision::FP16)
    fail(
        "bench: the train phase runs in fp32 or bf16 (fp16 training needs the loss scaler, which the bench "
        "leaves out); `tokenmill train --precision fp16` reports its throughput");
}

PhaseMeasurement TrainStepBench::run(ParameterSet& params) {
  const int64_t tokens = options_.batch * options_.seq_len;
  std::mt19937_64 rng(options_.seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(config_.vocab_size - 1));
  std::vector<int32_t> inputs(static_cast<size_t>(tokens)), targets(inputs.size());
  for (int32_t& t : inputs) t = id(rng);
  for (size_t i = 0; i < inputs.size(); ++i) targets[i] = i + 1 < inputs.size() ? inputs[i + 1] : id(rng);

  AdamWOptimizer optimizer{AdamWOptions{}};
  std::optional<ComputeWeights> rounded;  // bf16: the matrices' compute copy
  if (options_.precision != Precision::FP32)
    rounded.emplace(params.weights(), compute_dtype(options_.precision), backend_);
  const ModelWeights& multiplied = rounded ? rounded->weights() : params.weights();
  const auto step = [&] {
    params.zero_grads();
    const double loss = pass_.forward_backward(multiplied, params.grads(), inputs, targets, 1.0f).loss;
    if (!std::isfinite(loss))
      fail(
          "bench: the training loss of the random model is {}, not finite (a numerical defect; please report "
          "it)",
          loss);
    optimizer.step(params, backend_, kLearningRate, 1.0);
    if (rounded) rounded->refresh();
  };
  // A copy to the host waits for every op queued before it (on a GPU: the step's AdamW and
  // refresh), so the clock spans the timed steps alone.
  float last_value = 0.0f;
  const auto finish_queued = [&] {
    params.download(params.values().first(1), std::span<float>(&last_value, 1));
  };
  step();  // warm-up
  finish_queued();
  const auto start = BenchClock::now();
  for (int64_t s = 0; s < options_.steps; ++s) step();
  finish_queued();
  const auto end = BenchClock::now();
  const double seconds = std::chrono::duration<double>(end - start).count();
  // One step's figures, its time the mean of the timed steps.
  return {"train",
          options_.batch,
          tokens,
          seconds / static_cast<double>(options_.steps),
          static_cast<double>(options_.batch) * training_flops(config_, options_.seq_len),
          training_step_bytes(params.count()),
          start,
          end};
}

}  // namespace tokenmill
