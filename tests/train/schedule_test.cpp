// LR schedules and the dynamic loss scaler, against hand-computed values.
#include <gtest/gtest.h>

#include "support/expect_error.h"
#include "train/loss_scaler.h"
#include "train/lr_schedule.h"

namespace tokenmill {
namespace {

using testing::expect_error;

TEST(LrSchedule, WarmupThenCosine) {
  LrSchedule s{.max_lr = 1.0, .min_lr = 0.1, .warmup_steps = 4, .total_steps = 14, .decay = LrDecay::Cosine};
  EXPECT_DOUBLE_EQ(s.at(1), 0.25);  // 1 / 4
  EXPECT_DOUBLE_EQ(s.at(4), 1.0);
  // p = (9 - 4) / 10 = 0.5: 0.1 + 0.9 * 0.5 * (1 + cos(pi / 2)) = 0.55
  EXPECT_NEAR(s.at(9), 0.55, 1e-15);
  EXPECT_DOUBLE_EQ(s.at(14), 0.1);
  EXPECT_DOUBLE_EQ(s.at(20), 0.1);  // past the end: min_lr
}

TEST(LrSchedule, LinearAndConstant) {
  LrSchedule s{.max_lr = 2.0, .min_lr = 0.0, .warmup_steps = 0, .total_steps = 8, .decay = LrDecay::Linear};
  EXPECT_DOUBLE_EQ(s.at(2), 1.5);  // 2 + (0 - 2) * 2/8
  EXPECT_DOUBLE_EQ(s.at(8), 0.0);
  s.decay = LrDecay::Constant;
  EXPECT_DOUBLE_EQ(s.at(7), 2.0);
  EXPECT_EQ(parse_lr_decay("linear"), LrDecay::Linear);
  expect_error([] { parse_lr_decay("step"); }, {"--lr-decay", "'step'"});
}

TEST(LrSchedule, ValidatesFlags) {
  expect_error([] { LrSchedule{.max_lr = 0.0}.validate(); }, {"--lr"});
  expect_error([] { LrSchedule{.max_lr = 1e-3, .min_lr = 1e-2}.validate(); }, {"--min-lr"});
  expect_error([] { LrSchedule{.warmup_steps = -1}.validate(); }, {"--warmup-steps"});
  expect_error([] { LrSchedule{.total_steps = 0}.validate(); }, {"--steps"});
}

TEST(LossScaler, BacksOffOnOverflowAndGrowsAfterTheInterval) {
  LossScaler s({.enabled = true,
                .init_scale = 1024.0,
                .growth_factor = 2.0,
                .backoff_factor = 0.5,
                .growth_interval = 3});
  EXPECT_FALSE(s.update(true));  // skipped, 1024 -> 512
  EXPECT_DOUBLE_EQ(s.scale(), 512.0);
  EXPECT_TRUE(s.update(false));
  EXPECT_TRUE(s.update(false));
  EXPECT_DOUBLE_EQ(s.scale(), 512.0);
  EXPECT_TRUE(s.update(false));  // third finite step in a row: 512 -> 1024
  EXPECT_DOUBLE_EQ(s.scale(), 1024.0);
  EXPECT_EQ(s.growth_tracker(), 0);
  EXPECT_TRUE(s.update(false));
  EXPECT_FALSE(s.update(true));  // an overflow resets the tracker
  EXPECT_EQ(s.growth_tracker(), 0);
  EXPECT_DOUBLE_EQ(s.scale(), 512.0);
  s.restore(256.0, 2);
  EXPECT_TRUE(s.update(false));
  EXPECT_DOUBLE_EQ(s.scale(), 512.0);
  expect_error([&] { s.restore(-1.0, 0); }, {"loss scaler state"});
}

TEST(LossScaler, DisabledKeepsScaleOneAndSkipsNonFiniteSteps) {
  LossScaler s;
  EXPECT_DOUBLE_EQ(s.scale(), 1.0);
  EXPECT_TRUE(s.update(false));
  EXPECT_FALSE(s.update(true));
  EXPECT_DOUBLE_EQ(s.scale(), 1.0);
}

}  // namespace
}  // namespace tokenmill
