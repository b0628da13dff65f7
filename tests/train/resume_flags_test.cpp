// A resume continues its run faithfully or not at all: a flag that would change the run's
// trajectory (its schedule's length above all) and a finished run are refused with a message
// naming the flag and how to train further; flags that change no result are free.
#include <gtest/gtest.h>

#include <atomic>

#include "backend/backend.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"
#include "train/resume_check.h"
#include "train/tiny_run.h"
#include "train/trainer.h"

namespace tokenmill {
namespace {

using testing::expect_error;
using testing::TempDir;

class ResumeFlags : public ::testing::Test {
 protected:
  void SetUp() override {
    options_ = testing::tiny_run_options(dir_);
    options_.scratch_config = scratch_llama_config(512, 1, 16, 2, 1, 32, 32, 2);
    options_.run_dir = dir_.path() / "run";
    options_.eval_every = 0;
  }
  // Trains options_ until step 3 of 6, stopped as SIGINT stops it.
  void interrupted_run() {
    std::atomic<bool> stop{false};
    TrainObserver observer;
    observer.on_step = [&](const StepReport& r) { stop = r.step == 3; };
    ASSERT_TRUE(train(options_, *backend_, observer, &stop).stopped_early);
    options_.resume = true;
  }
  TempDir dir_;
  TrainOptions options_;
  std::unique_ptr<Backend> backend_ = make_cpu_backend();
};

TEST_F(ResumeFlags, ALongerScheduleIsRefusedWithTheWayToExtendTheRun) {
  interrupted_run();
  options_.steps = 12;
  expect_error([&] { train(options_, *backend_, {}); },
               {"--steps is 12", "used 6", "resume with --steps 6", "tokenmill export", "--from"});
  options_.steps = 6;
  options_.schedule.max_lr = 2e-2;
  expect_error([&] { train(options_, *backend_, {}); }, {"--lr is 0.02"});
  options_.schedule.max_lr = 1e-2;
  options_.schedule.decay = LrDecay::Linear;
  expect_error([&] { train(options_, *backend_, {}); }, {"--lr-decay is \"linear\""});
  options_.schedule.decay = LrDecay::Cosine;
  options_.grad_accum = 2;
  expect_error([&] { train(options_, *backend_, {}); },
               {"a step is now 8 sequences (--batch 4 x --grad-accum 2 x 1 rank(s))", "took 4 a step",
                "keeps its global batch", "tokenmill export"});
}

// Checkpoints written before data parallelism recorded no global batch: --batch x
// --grad-accum stands in for it.
TEST_F(ResumeFlags, ACheckpointWithoutAGlobalBatchKeepsBatchTimesGradAccum) {
  nlohmann::json saved = options_.to_json();
  saved.erase("global_batch");
  saved.erase("world_size");
  options_.batch = 2;
  options_.grad_accum = 2;
  EXPECT_NO_THROW(check_resume_options("old.tmckpt", 3, saved, options_.to_json()));
  options_.grad_accum = 1;
  expect_error([&] { check_resume_options("old.tmckpt", 3, saved, options_.to_json()); },
               {"a step is now 2 sequences", "took 4 a step"});
}

TEST_F(ResumeFlags, FlagsThatChangeNoResultAreFree) {
  interrupted_run();
  options_.batch = 2;  // the same global batch, split in two micro-batches
  options_.grad_accum = 2;
  options_.recompute_activations = true;
  options_.eval_every = 2;
  options_.checkpoint_every = 1;
  EXPECT_EQ(train(options_, *backend_, {}).last_step, 6);
}

TEST_F(ResumeFlags, AFinishedRunIsNotResumed) {
  train(options_, *backend_, {});
  options_.resume = true;
  expect_error([&] { train(options_, *backend_, {}); },
               {"end of its run (step 6 of 6)", "nothing to continue", "--from"});
  options_.steps = 40;
  expect_error([&] { train(options_, *backend_, {}); }, {"end of its run (step 6 of 6)"});
}

}  // namespace
}  // namespace tokenmill
