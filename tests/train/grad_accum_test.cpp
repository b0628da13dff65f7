// Gradient accumulation is a split of one batch, not another loss: on chat data (loss masks,
// so micro-batches score different numbers of targets) --batch 8, --batch 4 --grad-accum 2
// and --batch 2 --grad-accum 4 give the same losses and the same trained weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"
#include "train/parameters.h"
#include "train/prepare.h"
#include "train/tiny_run.h"
#include "train/trainer.h"

namespace tokenmill {
namespace {

using testing::TempDir;

// Chat records whose assistant turns differ in length: windows score few or many targets.
std::filesystem::path prepare_chat_data(const TempDir& dir) {
  std::string jsonl;
  const std::vector<std::string> replies = {
      "Yes.", "No, not today; ask me again tomorrow at noon.", "Maybe.",
      "Speak, speak. You are all resolved rather to die than to famish?"};
  for (int i = 0; i < 24; ++i) {
    const nlohmann::json record = {
        {"messages",
         {{{"role", "user"}, {"content", "Question number " + std::to_string(i) + ": will it rain?"}},
          {{"role", "assistant"}, {"content", replies[static_cast<size_t>(i) % replies.size()]}}}}};
    jsonl += record.dump() + "\n";
  }
  PrepareOptions p;
  p.inputs = {dir.write("chat.jsonl", jsonl)};
  p.out_dir = dir.path() / "data";
  p.val_fraction = 0.1;
  prepare_dataset(Tokenizer::from_model_dir(testing::kTinyRunModel), p);
  return p.out_dir;
}

struct RunResult {
  std::map<int64_t, double> losses;
  std::vector<float> weights;
};

RunResult run_split(const TempDir& dir, const std::filesystem::path& data, int64_t batch,
                    int64_t grad_accum) {
  TrainOptions o;
  o.data_dir = data;
  o.run_dir = dir.path() / ("run_" + std::to_string(batch) + "x" + std::to_string(grad_accum));
  o.scratch_config = scratch_llama_config(512, 2, 32, 4, 2, 64, 32, 2);
  o.batch = batch;
  o.grad_accum = grad_accum;
  o.seq_len = 16;
  o.steps = 3;
  o.schedule.max_lr = 1e-3;
  o.eval_every = 0;
  auto backend = make_cpu_backend();
  train(o, *backend, {});
  RunResult r;
  r.losses = testing::metrics_losses(o.run_dir);
  ParameterSet params(parse_model_config(o.scratch_config, "test"));
  load_checkpoint(latest_checkpoint(o.run_dir / "checkpoints"), params);
  r.weights.assign(params.values().begin(), params.values().end());
  return r;
}

TEST(GradientAccumulation, MaskedLossesDoNotDependOnTheSplit) {
  const TempDir dir;
  const auto data = prepare_chat_data(dir);
  const RunResult whole = run_split(dir, data, 8, 1);
  ASSERT_EQ(whole.losses.size(), 3u);
  for (const auto& [batch, accum] : {std::pair<int64_t, int64_t>{4, 2}, {2, 4}}) {
    SCOPED_TRACE("--batch " + std::to_string(batch) + " --grad-accum " + std::to_string(accum));
    const RunResult split = run_split(dir, data, batch, accum);
    ASSERT_EQ(split.losses.size(), whole.losses.size());
    for (const auto& [step, loss] : whole.losses) EXPECT_NEAR(split.losses.at(step), loss, 1e-6) << step;
    ASSERT_EQ(split.weights.size(), whole.weights.size());
    double worst = 0.0;
    for (size_t i = 0; i < whole.weights.size(); ++i)
      worst = std::max(worst, std::abs(static_cast<double>(split.weights[i]) - whole.weights[i]));
    EXPECT_LT(worst, 1e-6);
  }
}

}  // namespace
}  // namespace tokenmill
