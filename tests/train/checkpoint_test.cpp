// Checkpoints are trusted only when every byte is as written: a change anywhere (header,
// padding, arrays, trailer) is refused with a message naming the file; a format-1 file is
// refused with a message that says why; --resume passes over damaged newest checkpoints
// (naming them) to the newest that verifies and removes the temporaries of a save a crash
// cut short; checkpoints are also written by time.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"
#include "train/parameters.h"
#include "train/tiny_run.h"
#include "train/trainer.h"

namespace tokenmill {
namespace {

using testing::expect_error;
using testing::TempDir;

// A checkpoint of a very small model (a few thousand parameters) with moments set.
class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_json_ = scratch_llama_config(64, 1, 8, 2, 1, 16, 16, 2);
    config_ = parse_model_config(config_json_, "test");
    params_ = std::make_unique<ParameterSet>(config_);
    params_->init_gpt2(7);
    for (size_t i = 0; i < params_->first_moments().size(); ++i) {
      params_->first_moments()[i] = 0.001f * static_cast<float>(i % 97);
      params_->second_moments()[i] = 0.002f * static_cast<float>(i % 89);
    }
    CheckpointState state;
    state.step = 40;
    state.tokens = 40 * 64;
    state.optimizer_steps = 40;
    state.model_config = config_json_;
    state.options = {{"steps", 100}};
    path_ = save_checkpoint(dir_.path() / "checkpoints", state, *params_, 2);
    bytes_ = dir_.read("checkpoints/" + path_.filename().string());
  }
  // Bytes from the magic to the end of the header's padding (the arrays start there).
  size_t header_region() const {
    uint64_t n = 0;
    std::memcpy(&n, bytes_.data() + 8, sizeof n);
    return (16 + n + 63) / 64 * 64;
  }
  void expect_refused(const std::string& bytes, const std::string& what) const {
    const auto damaged = dir_.write("damaged.tmckpt", bytes);
    bool refused = false;
    try {
      ParameterSet loaded(config_);
      load_checkpoint(damaged, loaded);
    } catch (const Error& e) {
      refused = true;
      EXPECT_NE(std::string(e.what()).find("damaged.tmckpt"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(refused) << what << " was accepted";
  }

  TempDir dir_;
  nlohmann::json config_json_;
  ModelConfig config_;
  std::unique_ptr<ParameterSet> params_;
  std::filesystem::path path_;
  std::string bytes_;
};

TEST_F(CheckpointTest, ReadsBackWhatItWrote) {
  ParameterSet loaded(config_);
  const CheckpointState state = load_checkpoint(path_, loaded);
  EXPECT_EQ(state.step, 40);
  EXPECT_EQ(state.model_config, config_json_);
  EXPECT_TRUE(std::equal(loaded.values().begin(), loaded.values().end(), params_->values().begin()));
  EXPECT_TRUE(std::equal(loaded.second_moments().begin(), loaded.second_moments().end(),
                         params_->second_moments().begin()));
}

TEST_F(CheckpointTest, AChangeToAnyHeaderByteIsRefused) {
  const size_t header = header_region();
  ASSERT_GT(header, 64u);
  for (size_t i = 0; i < header; ++i) {
    std::string bytes = bytes_;
    bytes[i] = static_cast<char>(bytes[i] ^ 0x01);
    expect_refused(bytes, "a flip of header byte " + std::to_string(i));
  }
  // The step itself, as a person editing the header would change it.
  std::string edited = bytes_;
  const size_t at = edited.find("\"step\":40");
  ASSERT_NE(at, std::string::npos);
  edited[at + 8] = '1';
  expect_refused(edited, "\"step\":41");
}

TEST_F(CheckpointTest, RandomBitFlipsAnywhereAreRefused) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<size_t> byte(0, bytes_.size() - 1);
  std::uniform_int_distribution<int> bit(0, 7);
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes = bytes_;
    const size_t at = byte(rng);
    bytes[at] = static_cast<char>(bytes[at] ^ (1 << bit(rng)));
    expect_refused(bytes, "a bit flip at byte " + std::to_string(at));
  }
  expect_refused(bytes_.substr(0, bytes_.size() - 1), "a file one byte short");
  expect_refused(bytes_ + '\0', "a file one byte long");
}

TEST_F(CheckpointTest, AFormatOneCheckpointIsRefusedWithTheReason) {
  std::string old = bytes_;
  old[7] = '1';
  expect_error([&] { read_checkpoint_state(dir_.write("old.tmckpt", old)); },
               {"old.tmckpt", "older tokenmill", "cannot be verified"});
}

TEST(CheckpointResume, PassesOverDamagedNewestCheckpointsToTheNewestThatVerifies) {
  const TempDir dir;
  TrainOptions options = testing::tiny_run_options(dir);
  options.scratch_config = scratch_llama_config(512, 2, 32, 4, 2, 64, 32, 2);
  options.eval_every = 0;
  options.steps = 6;
  auto backend = make_cpu_backend();
  options.run_dir = dir.path() / "straight";
  train(options, *backend, {});
  const auto straight = testing::metrics_losses(options.run_dir);

  options.run_dir = dir.path() / "run";
  options.checkpoint_every = 2;
  options.keep_checkpoints = 3;
  std::atomic<bool> stop{false};
  TrainObserver stopper;
  stopper.on_step = [&](const StepReport& r) { stop = r.step == 4; };  // as SIGINT would
  train(options, *backend, stopper, &stop);
  const auto checkpoints = options.run_dir / "checkpoints";
  const auto newest = checkpoints / "step_00000004.tmckpt";
  ASSERT_TRUE(std::filesystem::exists(newest));
  std::string bytes = dir.read("run/checkpoints/step_00000004.tmckpt");
  bytes[100] = static_cast<char>(bytes[100] ^ 0x20);
  dir.write("run/checkpoints/step_00000004.tmckpt", bytes);
  const auto stale = dir.write("run/checkpoints/step_00000006.tmckpt.tmp", "half a checkpoint");

  options.resume = true;
  std::vector<std::string> lines;
  TrainObserver observer;
  observer.on_info = [&](std::string_view line) { lines.emplace_back(line); };
  EXPECT_EQ(train(options, *backend, observer).first_step, 3);
  const auto has = [&](const std::vector<std::string>& parts) {
    for (const auto& line : lines) {
      bool all = true;
      for (const auto& part : parts) all = all && line.find(part) != std::string::npos;
      if (all) return true;
    }
    return false;
  };
  EXPECT_TRUE(has({"warning: skipping checkpoint", "step_00000004.tmckpt", "does not match its hash"}));
  EXPECT_TRUE(has({"removed", "step_00000006.tmckpt.tmp"}));
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_EQ(testing::metrics_losses(options.run_dir), straight);  // resumed bit-exactly from step 2

  // None that verifies: a clear error.
  for (const auto& entry : std::filesystem::directory_iterator(checkpoints))
    dir.write(std::filesystem::relative(entry.path(), dir.path()).string(), "damaged");
  expect_error([&] { train(options, *backend, {}); }, {"--resume: no checkpoint that verifies"});
}

TEST(CheckpointSchedule, CheckpointsAreAlsoWrittenByTime) {
  const TempDir dir;
  TrainOptions options = testing::tiny_run_options(dir);
  options.scratch_config = scratch_llama_config(512, 1, 16, 2, 1, 32, 32, 2);
  options.eval_every = 0;
  options.steps = 3;
  options.keep_checkpoints = 10;
  options.run_dir = dir.path() / "by_time";
  options.checkpoint_minutes = 1e-9;  // every step is later than that
  auto backend = make_cpu_backend();
  std::vector<std::string> saved;
  TrainObserver observer;
  observer.on_checkpoint = [&](const std::filesystem::path& p) { saved.push_back(p.filename().string()); };
  train(options, *backend, observer);
  EXPECT_EQ(saved, (std::vector<std::string>{"step_00000001.tmckpt", "step_00000002.tmckpt",
                                             "step_00000003.tmckpt"}));
  saved.clear();
  options.run_dir = dir.path() / "at_end";
  options.checkpoint_minutes = 0.0;
  train(options, *backend, observer);
  EXPECT_EQ(saved, std::vector<std::string>{"step_00000003.tmckpt"});
  options.checkpoint_minutes = -1.0;
  expect_error([&] { train(options, *backend, observer); }, {"--checkpoint-minutes"});
}

}  // namespace
}  // namespace tokenmill
