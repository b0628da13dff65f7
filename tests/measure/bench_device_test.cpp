// The bench phases on a backend whose memory the host cannot touch (FencedBackend: the CPU
// backend behind PROT_NONE pages, as a GPU's memory is): prefill, the decode sweep and the
// roofline calibration run there without a host access to its memory (that would be a
// SIGSEGV), count the same tokens as on the CPU and decode the same greedy ids; the train
// phase makes its training state in the device's memory and pays for it from the device's
// budget.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "measure/bench_model.h"
#include "measure/bench_runner.h"
#include "measure/decode_sweep.h"
#include "model/fenced_backend.h"
#include "model/weight_placement.h"
#include "support/expect_error.h"
#include "support/random_tokens.h"

namespace tokenmill {
namespace {

using testing::FencedBackend;
using ::testing::HasSubstr;

const std::filesystem::path kLlama = std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "hf/llama";
constexpr uint64_t kBudget = uint64_t{1} << 30;

BenchOptions quick_options() {
  BenchOptions o;
  o.prompt_tokens = 21;
  o.decode_tokens = 5;
  o.batch_sizes = {1, 3};
  o.calibration = {.gemm_size = 48, .read_bytes = 1u << 20, .min_seconds = 0.002, .passes = 1};
  return o;
}

class BenchOnDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    host_model_ = load_bench_model(kLlama);
    device_model_ = load_bench_model(kLlama);
    place_weights(device_model_.model->weights, fenced_.memory());
  }

  // Declared first, destroyed last: the placed weights live in its memory.
  FencedBackend fenced_{make_cpu_backend()};
  std::unique_ptr<Backend> cpu_ = make_cpu_backend();
  BenchModel host_model_, device_model_;
};

TEST_F(BenchOnDevice, PhasesCountTheSameTokensAsOnTheCpu) {
  BenchOptions options = quick_options();
  MemoryBudget host_budget(kBudget), device_budget(kBudget);
  const BenchRun want = run_bench(host_model_, *cpu_, options, host_budget);
  const int ops_before = fenced_.ops();
  const BenchRun got = run_bench(device_model_, fenced_, options, device_budget);
  EXPECT_GT(fenced_.ops(), ops_before);

  // prefill, decode at 1 and 3, train.
  ASSERT_EQ(got.phases.size(), 4u);
  ASSERT_EQ(want.phases.size(), 4u);
  for (size_t i = 0; i < got.phases.size(); ++i) {
    EXPECT_EQ(got.phases[i].phase, want.phases[i].phase) << i;
    EXPECT_EQ(got.phases[i].batch, want.phases[i].batch) << i;
    EXPECT_EQ(got.phases[i].tokens, want.phases[i].tokens) << i;
    EXPECT_DOUBLE_EQ(got.phases[i].flops, want.phases[i].flops) << i;
    EXPECT_DOUBLE_EQ(got.phases[i].bytes, want.phases[i].bytes) << i;
    EXPECT_GT(got.phases[i].seconds, 0.0) << i;
  }
  EXPECT_EQ(got.phases[2].tokens, 15);  // 3 sequences x 5 steps
  EXPECT_EQ(got.phases[3].phase, "train");
  EXPECT_TRUE(got.notes.empty()) << got.notes[0];

  EXPECT_EQ(got.device.backend, "fenced-cpu");
  EXPECT_EQ(got.device.name, "fenced-cpu");
  EXPECT_EQ(got.device.isa, "");
  EXPECT_EQ(want.device.backend, "cpu");
  // NVML is read only for a CUDA device.
  EXPECT_EQ(got.gpu_sampling, "not sampled: the run is on fenced-cpu, not an NVIDIA GPU");
  EXPECT_EQ(want.gpu_sampling, "not sampled: the run is on the CPU");
  for (const PhaseMeasurement& p : got.phases) EXPECT_FALSE(p.gpu.has_value()) << p.phase;
  // The ceilings were measured in the device's memory: by its copy, not the host read.
  EXPECT_TRUE(got.ceilings.device_copy);
  EXPECT_FALSE(want.ceilings.device_copy);
  EXPECT_GT(got.ceilings.peak_flops, 0.0);
  EXPECT_GT(got.ceilings.read_bandwidth, 0.0);
  // The device's budget paid for the KV caches (and got them back) and for the training
  // state, as the host's did.
  EXPECT_LT(device_budget.left(), kBudget);
  EXPECT_EQ(device_budget.left(), host_budget.left());
}

TEST_F(BenchOnDevice, DecodeSweepGivesTheCpuGreedyIds) {
  const Model& host = *host_model_.model;
  const std::vector<int32_t> prompt = testing::random_token_ids(37, host.config.vocab_size, 5);
  const std::vector<int64_t> batches = {1, 2, 5};
  MemoryBudget budget(kBudget);
  std::vector<int32_t> want, got;
  decode_sweep(host, *cpu_, prompt, 6, batches, budget, &want);
  decode_sweep(*device_model_.model, fenced_, prompt, 6, batches, budget, &got);
  EXPECT_EQ(want.size(), (1u + 2u + 5u) * 6u);
  EXPECT_EQ(got, want);
}

TEST_F(BenchOnDevice, ATrainPhaseMustFitTheDevicesBudget) {
  BenchOptions options = quick_options();
  options.prefill = options.decode = false;
  options.train = TrainPhase::On;
  MemoryBudget room(kBudget);
  const BenchRun trained = run_bench(device_model_, fenced_, options, room);
  ASSERT_EQ(trained.phases.size(), 1u);
  const uint64_t needed = kBudget - room.left();  // activations + 16 bytes per parameter
  EXPECT_GT(needed, 16u * static_cast<uint64_t>(device_model_.summary.parameters));

  MemoryBudget tight(needed - 1);
  testing::expect_error([&] { run_bench(device_model_, fenced_, options, tight); },
                        {"the f32 weights, gradients and AdamW moments of training"});
  options.train = TrainPhase::Auto;
  options.prefill = true;
  MemoryBudget small(needed);  // Auto trains only within half the budget
  const BenchRun skipped = run_bench(device_model_, fenced_, options, small);
  ASSERT_EQ(skipped.notes.size(), 1u);
  EXPECT_THAT(skipped.notes[0], HasSubstr("no train phase: its training state"));
}

TEST_F(BenchOnDevice, WeightsLeftOnTheHostAreRefused) {
  MemoryBudget budget(kBudget);
  testing::expect_error([&] { run_bench(host_model_, fenced_, quick_options(), budget); },
                        {"are not in the memory of fenced-cpu"});
}

}  // namespace
}  // namespace tokenmill
