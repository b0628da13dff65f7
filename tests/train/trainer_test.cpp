// The training loop end to end on a tiny Llama-style model: it learns, an interrupted and
// resumed run continues bit-exactly (also when activation recomputation is switched on or
// off across the resume), and damaged checkpoints are refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/mapped_file.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"
#include "train/tiny_run.h"
#include "train/trainer.h"

namespace tokenmill {
namespace {

using testing::expect_error;
using testing::metrics_losses;
using testing::TempDir;
using testing::tiny_run_options;

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_ = tiny_run_options(dir_);
    options_.scratch_config = scratch_llama_config(512, 2, 32, 4, 2, 64, 32, 2);
  }
  TempDir dir_;
  TrainOptions options_;
};

TEST_F(TrainerTest, LearnsAndWritesItsRunDirectory) {
  options_.run_dir = dir_.path() / "run";
  options_.steps = 12;
  options_.peak_flops = 1e15;  // far above any CPU: MFU must come out in (0, 0.01)
  auto backend = make_cpu_backend();
  std::vector<double> mfus;
  TrainObserver observer;
  observer.on_step = [&](const StepReport& r) { mfus.push_back(r.mfu); };
  const TrainSummary s = train(options_, *backend, observer);
  ASSERT_EQ(mfus.size(), 12u);
  for (const double m : mfus) EXPECT_TRUE(m > 0.0 && m < 0.01) << m;
  ASSERT_TRUE(s.first_eval && s.last_eval);
  EXPECT_LT(s.last_eval->loss, s.first_eval->loss - 1.0);  // from ~ln(512) = 6.2: visibly learning
  EXPECT_EQ(s.tokens, 12 * 4 * 16);
  EXPECT_EQ(metrics_losses(options_.run_dir).size(), 12u);
  EXPECT_TRUE(std::filesystem::exists(options_.run_dir / "loss.svg"));
  EXPECT_EQ(latest_checkpoint(options_.run_dir / "checkpoints").filename(), "step_00000012.tmckpt");
}

TEST_F(TrainerTest, InterruptedRunResumesBitExactly) {
  auto backend = make_cpu_backend();
  testing::expect_resume_is_bit_exact(options_, dir_, *backend);
}

TEST_F(TrainerTest, RecomputedActivationsChangeNoLossAcrossAResume) {
  auto backend = make_cpu_backend();
  // Straight without, interrupted with, resumed without; then the other way round (in other
  // run directories, the data staying in dir_).
  testing::expect_resume_is_bit_exact(options_, dir_, *backend, true);
  options_.recompute_activations = true;
  const TempDir runs;
  testing::expect_resume_is_bit_exact(options_, runs, *backend, true);
}

TEST_F(TrainerTest, DamagedOrForeignCheckpointsAreRefused) {
  auto backend = make_cpu_backend();
  options_.run_dir = dir_.path() / "run";
  options_.steps = 2;
  train(options_, *backend, {});
  const auto path = latest_checkpoint(options_.run_dir / "checkpoints");
  std::string bytes = dir_.read(std::filesystem::relative(path, dir_.path()).string());
  bytes[bytes.size() - 5] ^= 1;
  const auto damaged = dir_.write("damaged.tmckpt", bytes);
  expect_error([&] { read_checkpoint_state(damaged); }, {"damaged.tmckpt", "does not match its hash"});
  const auto truncated = dir_.write("truncated.tmckpt", bytes.substr(0, bytes.size() / 2));
  expect_error([&] { read_checkpoint_state(truncated); }, {"truncated or damaged"});
  expect_error([&] { read_checkpoint_state(dir_.write("junk.tmckpt", "not a checkpoint at all")); },
               {"bad magic"});

  options_.scratch_config = scratch_llama_config(512, 3, 32, 4, 2, 64, 32, 2);  // another model
  options_.resume = true;
  expect_error([&] { train(options_, *backend, {}); }, {"parameters do not match this model"});
  options_.run_dir = dir_.path() / "empty";
  expect_error([&] { train(options_, *backend, {}); }, {"--resume: no checkpoint"});
}

}  // namespace
}  // namespace tokenmill
