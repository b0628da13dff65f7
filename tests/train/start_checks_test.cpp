// What would fail late, or silently, is refused before the first step: binary input to
// prepare, out-of-range optimizer flags, a warmup longer than the run, a checkpoint folder that
// cannot be written; a dataset without validation data trains with evaluation off.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "backend/backend.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"
#include "train/prepare.h"
#include "train/tiny_run.h"
#include "train/trainer.h"

namespace tokenmill {
namespace {

using testing::expect_error;
using testing::TempDir;

class StartChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    options_ = testing::tiny_run_options(dir_);
    options_.scratch_config = scratch_llama_config(512, 1, 16, 2, 1, 32, 32, 2);
    options_.run_dir = dir_.path() / "run";
  }
  // Trains `options_` expecting an Error mentioning `parts`, with no step taken.
  void expect_refused_at_start(const std::vector<std::string>& parts) {
    int steps = 0;
    TrainObserver observer;
    observer.on_step = [&](const StepReport&) { ++steps; };
    auto backend = make_cpu_backend();
    expect_error([&] { train(options_, *backend, observer); }, parts);
    EXPECT_EQ(steps, 0);
  }
  TempDir dir_;
  TrainOptions options_;
};

TEST_F(StartChecks, OutOfRangeOptimizerFlagsAreRefused) {
  for (const double norm : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    options_.adamw.max_grad_norm = norm;
    expect_refused_at_start({"--max-grad-norm"});
  }
  options_.adamw.max_grad_norm = 1.0;
  options_.adamw.eps = 0.0;
  expect_refused_at_start({"--adam-eps"});
  options_.adamw.eps = 1e-8;
  options_.adamw.weight_decay = std::nan("");
  expect_refused_at_start({"--weight-decay"});
}

TEST_F(StartChecks, AWarmupLongerThanTheRunIsRefused) {
  options_.schedule.warmup_steps = options_.steps + 1;
  expect_refused_at_start({"--warmup-steps (7) is longer than the run (--steps 6)"});
}

TEST_F(StartChecks, AnUnwritableCheckpointFolderIsRefused) {
  std::filesystem::create_directories(options_.run_dir);
  dir_.write("run/checkpoints", "a file where the checkpoint folder should be");
  expect_refused_at_start({"run/checkpoints", "checkpoint directory"});
}

TEST_F(StartChecks, DataWithoutValidationTrainsWithEvaluationOff) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "First Citizen:\nBefore we proceed any further, hear me speak.\n";
  PrepareOptions p;
  p.inputs = {dir_.write("all_train.txt", text)};
  p.out_dir = dir_.path() / "no_val";
  p.val_fraction = 0.0;
  prepare_dataset(Tokenizer::from_model_dir(testing::kTinyRunModel), p);
  options_.data_dir = p.out_dir;
  options_.eval_every = 0;
  auto backend = make_cpu_backend();
  EXPECT_EQ(train(options_, *backend, {}).last_step, options_.steps);
  options_.eval_every = 3;
  options_.run_dir = dir_.path() / "with_eval";
  expect_refused_at_start({"no validation data", "--eval-every 0"});
}

TEST(PrepareInput, BinaryFilesAreNotText) {
  const TempDir dir;
  const Tokenizer tokenizer = Tokenizer::from_model_dir(testing::kTinyRunModel);
  PrepareOptions p;
  p.out_dir = dir.path() / "data";
  p.inputs = {dir.write("program.txt", std::string("\x7f"
                                                   "ELF\x02\x01\x01\0\0\0\0\0\0\0\0\0",
                                                   16))};
  expect_error([&] { prepare_dataset(tokenizer, p); }, {"program.txt", "not text", "U+0002"});
  p.inputs = {dir.write("latin1.txt", "caf\xe9 au lait\n")};
  expect_error([&] { prepare_dataset(tokenizer, p); }, {"latin1.txt", "not UTF-8 text (byte 3 is 0xe9)"});
  EXPECT_FALSE(std::filesystem::exists(p.out_dir / "meta.json"));
}

}  // namespace
}  // namespace tokenmill
