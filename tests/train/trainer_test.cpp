// The training loop end to end on a tiny Llama-style model: it learns, an interrupted and
// resumed run continues bit-exactly, and damaged checkpoints are refused.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/mapped_file.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"
#include "train/prepare.h"
#include "train/trainer.h"

namespace tokenmill {
namespace {

using testing::expect_error;
using testing::TempDir;

const std::filesystem::path kModelDir = std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "hf" / "smollm_chat";

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string text;
    for (int i = 0; i < 40; ++i)
      text += "First Citizen:\nBefore we proceed any further, hear me speak.\nAll:\nSpeak, speak.\n";
    PrepareOptions p;
    p.inputs = {dir_.write("corpus.txt", text)};
    p.out_dir = dir_.path() / "data";
    p.val_fraction = 0.2;
    prepare_dataset(Tokenizer::from_model_dir(kModelDir), p);
    options_.data_dir = p.out_dir;
    options_.scratch_config = scratch_llama_config(512, 2, 32, 4, 2, 64, 32, 2);
    options_.batch = 4;
    options_.seq_len = 16;
    options_.steps = 6;
    options_.schedule.max_lr = 1e-2;
    options_.schedule.min_lr = 1e-3;
    options_.schedule.warmup_steps = 2;
    options_.eval_every = 3;
    options_.eval_batches = 2;
  }
  // Train losses by step, read back from metrics.jsonl.
  std::map<int64_t, double> losses(const std::filesystem::path& run) const {
    std::map<int64_t, double> out;
    std::ifstream in(run / "metrics.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      if (j.contains("loss")) out[j["step"].get<int64_t>()] = j["loss"].get<double>();
    }
    return out;
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
  EXPECT_EQ(losses(options_.run_dir).size(), 12u);
  EXPECT_TRUE(std::filesystem::exists(options_.run_dir / "loss.svg"));
  EXPECT_EQ(latest_checkpoint(options_.run_dir / "checkpoints").filename(), "step_00000012.tmckpt");
}

TEST_F(TrainerTest, InterruptedRunResumesBitExactly) {
  auto backend = make_cpu_backend();
  options_.run_dir = dir_.path() / "straight";
  train(options_, *backend, {});
  const auto straight = losses(options_.run_dir);

  options_.run_dir = dir_.path() / "interrupted";
  std::atomic<bool> stop{false};
  TrainObserver observer;
  observer.on_step = [&](const StepReport& r) {
    if (r.step == 3) stop = true;  // as SIGINT would, mid-run
  };
  const TrainSummary first = train(options_, *backend, observer, &stop);
  EXPECT_TRUE(first.stopped_early);
  EXPECT_EQ(first.last_step, 3);
  options_.resume = true;
  const TrainSummary second = train(options_, *backend, {});
  EXPECT_EQ(second.first_step, 4);
  const auto resumed = losses(options_.run_dir);
  ASSERT_EQ(resumed.size(), straight.size());
  for (const auto& [step, loss] : straight)
    EXPECT_EQ(resumed.at(step), loss) << "step " << step;  // bit-exact
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
