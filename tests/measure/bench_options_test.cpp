// --batch and --phases parsing, the memory budget, and the traffic of batched decode and of
// a training step, against hand-worked numbers.
#include <gtest/gtest.h>

#include "measure/bench_runner.h"
#include "measure/memory_budget.h"
#include "measure/traffic.h"
#include "support/expect_error.h"

namespace tokenmill {
namespace {

TEST(BenchOptions, BatchSizesAreSortedAndUnique) {
  EXPECT_EQ(parse_batch_sizes("1,2,4,8"), (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(parse_batch_sizes("8,1,8"), (std::vector<int64_t>{1, 8}));
  EXPECT_EQ(parse_batch_sizes("4096"), (std::vector<int64_t>{4096}));
}

TEST(BenchOptions, BatchGarbageIsAnError) {
  for (const char* bad : {"", "1,,2", "1,x", "0", "-1", "2.5", "4097", "1, 2", "99999999999999999999"})
    testing::expect_error([&] { parse_batch_sizes(bad); }, {"--batch:", "1,2,4,8"});
}

TEST(BenchOptions, Phases) {
  BenchOptions o;
  EXPECT_EQ(o.train, TrainPhase::Auto);
  parse_phases("train", o);
  EXPECT_FALSE(o.prefill);
  EXPECT_FALSE(o.decode);
  EXPECT_EQ(o.train, TrainPhase::On);
  parse_phases("decode,prefill", o);
  EXPECT_TRUE(o.prefill && o.decode);
  EXPECT_EQ(o.train, TrainPhase::Off);
  testing::expect_error([&] { parse_phases("prefill,bogus", o); }, {"'bogus' is not a phase"});
  testing::expect_error([&] { parse_phases("train,train", o); }, {"'train' is repeated"});
  testing::expect_error([&] { parse_phases("decode,decode", o); }, {"'decode' is repeated"});
}

TEST(MemoryBudget, ReservesAndRefusesWithTheFigures) {
  MemoryBudget budget(3u << 30);
  budget.reserve(1u << 30, "the first", "do less");
  EXPECT_EQ(budget.left(), 2u << 30);
  testing::expect_error([&] { budget.reserve(5u << 29, "the weights", "do less"); },
                        {"the weights need 2.50 GiB but only 2.00 GiB", ": do less, or free memory"});
  budget.release(1u << 30);
  EXPECT_EQ(budget.left(), 3u << 30);
}

TEST(Traffic, BatchedDecodeReadsTheWeightsOncePerStep) {
  const WeightTraffic t{1000, 200, 10, 4};
  // Batch 1 at position 9 is a one-token forward: 1000 + 200 + 10 + 4 x 10 = 1250.
  EXPECT_DOUBLE_EQ(batched_decode_bytes(t, 9, 1), 1250.0);
  EXPECT_DOUBLE_EQ(batched_decode_bytes(t, 9, 1), forward_bytes(t, 9, 1, 256));
  // Batch 3: the weights once, each sequence its row and KV: 1200 + 3 x 50 = 1350.
  EXPECT_DOUBLE_EQ(batched_decode_bytes(t, 9, 3), 1350.0);
  testing::expect_error([&] { batched_decode_bytes(t, 9, 0); }, {"batch >= 1"});
}

TEST(Traffic, MixtureOfExpertsReadsOnlyTheExpertsItsTokensRun) {
  // 8 experts of 100 bytes (over all layers), 2 per token.
  const WeightTraffic t{.layer_bytes = 1000,
                        .logits_bytes = 200,
                        .embedding_row_bytes = 10,
                        .kv_bytes_per_position = 4,
                        .expert_bytes = 100,
                        .experts = 8,
                        .experts_per_token = 2};
  EXPECT_DOUBLE_EQ(step_layer_bytes(t, 1), 1200.0);  // 2 experts
  EXPECT_DOUBLE_EQ(step_layer_bytes(t, 3), 1600.0);  // at most 6
  EXPECT_DOUBLE_EQ(step_layer_bytes(t, 5), 1800.0);  // at most all 8
  EXPECT_DOUBLE_EQ(batched_decode_bytes(t, 9, 1), 1450.0);
  EXPECT_DOUBLE_EQ(forward_bytes(t, 0, 1, 256), 1200.0 + 200 + 10 + 4);
  // Two chunks of 4 tokens each read all 8 experts: 2 x 1800 + 200 + 8 x 10 + 4 x (4 + 8).
  EXPECT_DOUBLE_EQ(forward_bytes(t, 0, 8, 4), 2 * 1800.0 + 200 + 80 + 48);
}

TEST(Traffic, TrainingStepReadsSevenF32CopiesOfTheParameters) {
  EXPECT_DOUBLE_EQ(training_step_bytes(1000), 28000.0);
  testing::expect_error([] { training_step_bytes(0); }, {"parameters >= 1"});
}

}  // namespace
}  // namespace tokenmill
