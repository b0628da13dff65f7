// A short training run for the trainer tests: a small repeated corpus prepared with the
// smollm_chat fixture's tokenizer, and the options of a 6-step run over it.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "backend/backend.h"
#include "support/temp_dir.h"
#include "train/prepare.h"
#include "train/trainer.h"

namespace tokenmill::testing {

inline const std::filesystem::path kTinyRunModel =
    std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "hf" / "smollm_chat";

// Prepares dir/data (80% train, 20% validation); batch 4 x 16 tokens, 6 steps, lr 1e-2 ->
// 1e-3 after 2 warmup steps, validation every 3 steps over 2 batches. No run_dir, no model.
inline TrainOptions tiny_run_options(const TempDir& dir) {
  std::string text;
  for (int i = 0; i < 40; ++i)
    text += "First Citizen:\nBefore we proceed any further, hear me speak.\nAll:\nSpeak, speak.\n";
  PrepareOptions p;
  p.inputs = {dir.write("corpus.txt", text)};
  p.out_dir = dir.path() / "data";
  p.val_fraction = 0.2;
  prepare_dataset(Tokenizer::from_model_dir(kTinyRunModel), p);
  TrainOptions o;
  o.data_dir = p.out_dir;
  o.batch = 4;
  o.seq_len = 16;
  o.steps = 6;
  o.schedule.max_lr = 1e-2;
  o.schedule.min_lr = 1e-3;
  o.schedule.warmup_steps = 2;
  o.eval_every = 3;
  o.eval_batches = 2;
  return o;
}

// Train losses by step, read back from run/metrics.jsonl.
inline std::map<int64_t, double> metrics_losses(const std::filesystem::path& run) {
  std::map<int64_t, double> out;
  std::ifstream in(run / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) out[j["step"].get<int64_t>()] = j["loss"].get<double>();
  }
  return out;
}

// Runs `options` straight into dir/straight, then into dir/interrupted stopped after step 3
// (as SIGINT does) and resumed: the resumed run's losses must equal the straight run's, bit
// for bit. flip_recompute: the interrupted run's first part flips recompute_activations
// (which must change no bit), its resumed part is back to `options`.
inline void expect_resume_is_bit_exact(TrainOptions options, const TempDir& dir, Backend& backend,
                                       bool flip_recompute = false) {
  options.run_dir = dir.path() / "straight";
  train(options, backend, {});
  const auto straight = metrics_losses(options.run_dir);
  options.run_dir = dir.path() / "interrupted";
  options.recompute_activations = options.recompute_activations != flip_recompute;
  std::atomic<bool> stop{false};
  TrainObserver observer;
  observer.on_step = [&](const StepReport& r) {
    if (r.step == 3) stop = true;  // as SIGINT would, mid-run
  };
  const TrainSummary first = train(options, backend, observer, &stop);
  EXPECT_TRUE(first.stopped_early);
  EXPECT_EQ(first.last_step, 3);
  options.resume = true;
  options.recompute_activations = options.recompute_activations != flip_recompute;
  EXPECT_EQ(train(options, backend, {}).first_step, 4);
  const auto resumed = metrics_losses(options.run_dir);
  ASSERT_EQ(resumed.size(), straight.size());
  for (const auto& [step, loss] : straight)
    EXPECT_EQ(resumed.at(step), loss) << "step " << step;  // bit-exact
}

}  // namespace tokenmill::testing
