// The training precision policy (train/precision.h) on the CPU backend: the compute copy of
// the matrices is the rounded master and follows it, bf16 / fp16 runs learn like the fp32 run
// without being it, fp16's loss scale backs off on overflow and grows like GradScaler and
// carries over a resume, and a diverging run stops with a clear error.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "backend/backend.h"
#include "core/dtype.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"
#include "train/compute_weights.h"
#include "train/loss_scaler.h"
#include "train/parameters.h"
#include "train/tiny_run.h"
#include "train/trainer.h"

namespace tokenmill {
namespace {

using testing::expect_error;
using testing::metrics_losses;
using testing::TempDir;
using testing::tiny_run_options;

// Every step line of run/metrics.jsonl, in order.
std::vector<nlohmann::json> step_lines(const std::filesystem::path& run) {
  std::vector<nlohmann::json> out;
  std::ifstream in(run / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) out.push_back(std::move(j));
  }
  return out;
}

// Whether `copy` is its own buffer of `dtype` holding every element of f32 `master` rounded.
bool is_rounded_copy(const Tensor& master, const Tensor& copy, DType dtype) {
  if (copy.dtype != dtype || copy.data == master.data || copy.numel() != master.numel()) return false;
  for (int64_t i = 0; i < master.numel(); ++i) {
    const float m = master.as<const float>()[i];
    const float rounded = dtype == DType::BF16 ? bf16_to_f32(f32_to_bf16(m)) : f16_to_f32(f32_to_f16(m));
    if (load_as_f32(copy.data, dtype, static_cast<size_t>(i)) != rounded) return false;
  }
  return true;
}

TEST(ComputeWeights, CopiesAreTheRoundedMatricesAndTheRestIsTheMaster) {
  const ModelConfig config = parse_model_config(scratch_llama_config(64, 2, 32, 4, 2, 48, 16, 0), "test");
  ASSERT_TRUE(config.tie_word_embeddings);
  auto backend = make_cpu_backend();
  ParameterSet params(config, backend.get());
  params.init_gpt2(7);
  for (const DType dtype : {DType::BF16, DType::F16}) {
    ComputeWeights compute(params.weights(), dtype, *backend);
    const ModelWeights& master = params.weights();
    const ModelWeights& w = compute.weights();
    for (size_t l = 0; l < master.layers.size(); ++l) {
      const LayerWeights &from = master.layers[l], &to = w.layers[l];
      const auto from_matrices = layer_matrices(from);
      const auto to_matrices = layer_matrices(to);
      for (size_t j = 0; j < from_matrices.size(); ++j)
        EXPECT_TRUE(is_rounded_copy(*from_matrices[j], *to_matrices[j], dtype))
            << "layer " << l << " matrix " << j;
      EXPECT_EQ(to.attn_norm_weight.data, from.attn_norm_weight.data);
      EXPECT_EQ(to.mlp_norm_weight.data, from.mlp_norm_weight.data);
    }
    // Tied: the lookup reads the FP32 table, the logits its own rounded copy.
    EXPECT_EQ(w.token_embedding.data, master.token_embedding.data);
    EXPECT_TRUE(is_rounded_copy(master.token_embedding, w.lm_head, dtype));
    EXPECT_EQ(w.final_norm_weight.data, master.final_norm_weight.data);

    // An optimizer step changes the master: refresh() follows it.
    for (float& v : params.values()) v = v * 1.5f + 0.001f;
    EXPECT_FALSE(is_rounded_copy(master.layers[0].q, w.layers[0].q, dtype));
    compute.refresh();
    EXPECT_TRUE(is_rounded_copy(master.layers[1].down, w.layers[1].down, dtype));
    EXPECT_TRUE(is_rounded_copy(master.token_embedding, w.lm_head, dtype));
  }
}

TEST(ComputeWeights, MatricesAlreadyInTheDtypeAreViewedOthersRefused) {
  const ModelConfig config = parse_model_config(scratch_llama_config(64, 1, 32, 4, 2, 48, 16, 0), "test");
  auto backend = make_cpu_backend();
  ParameterSet params(config, backend.get());
  params.init_gpt2(7);
  const ComputeWeights bf16(params.weights(), DType::BF16, *backend);
  // A frozen bf16 model (LoRA's base) under bf16: nothing to round, every matrix viewed.
  const ComputeWeights again(bf16.weights(), DType::BF16, *backend);
  EXPECT_EQ(again.bytes(), 0u);
  EXPECT_EQ(again.weights().layers[0].up.data, bf16.weights().layers[0].up.data);
  expect_error([&] { ComputeWeights(bf16.weights(), DType::F16, *backend); },
               {"bf16 matrices cannot be multiplied as f16 copies", "precision"});
  expect_error([&] { ComputeWeights(params.weights(), DType::F32, *backend); }, {"bf16 or f16"});
}

class PrecisionRun : public ::testing::Test {
 protected:
  void SetUp() override {
    options_ = tiny_run_options(dir_);
    options_.scratch_config = scratch_llama_config(512, 2, 32, 4, 2, 64, 32, 2);
  }
  std::map<int64_t, double> losses(Precision precision, const std::string& run) {
    options_.precision = precision;
    options_.run_dir = dir_.path() / run;
    train(options_, *backend_, {});
    return metrics_losses(options_.run_dir);
  }
  TempDir dir_;
  TrainOptions options_;
  std::unique_ptr<Backend> backend_ = make_cpu_backend();
};

TEST_F(PrecisionRun, ReducedPrecisionLearnsLikeFp32WithoutBeingIt) {
  options_.steps = 8;
  const auto fp32 = losses(Precision::FP32, "fp32");
  for (const Precision p : {Precision::BF16, Precision::FP16}) {
    const auto reduced = losses(p, std::string(precision_name(p)));
    ASSERT_EQ(reduced.size(), fp32.size());
    // The same model at step 1 (from the rounded initial weights), then its own trajectory.
    bool differs = false;
    for (const auto& [step, loss] : fp32) {
      EXPECT_NEAR(reduced.at(step), loss, 0.03 * loss) << precision_name(p) << " step " << step;
      differs = differs || reduced.at(step) != loss;
    }
    EXPECT_TRUE(differs) << precision_name(p) << " gave the fp32 losses bit for bit: the copies are not used";
    EXPECT_LT(reduced.at(8), reduced.at(1) - 1.0) << precision_name(p);
  }
}

TEST_F(PrecisionRun, Fp16SkipsOverflowingStepsAndScalesLikeGradScaler) {
  // 2^130 and 2^129 overflow f32 in the first gradient itself (the scaled loss seed is
  // infinite), 2^128 too (FLT_MAX is just below it): three skipped steps, then the halved
  // scales must let steps through (once the products of the backward fit too), the scale
  // growing after every 2 finite steps and backing off again when that overflows.
  options_.precision = Precision::FP16;
  options_.initial_loss_scale = std::ldexp(1.0, 130);
  options_.loss_scale_growth_interval = 2;
  options_.steps = 12;
  options_.run_dir = dir_.path() / "fp16";
  const TrainSummary s = train(options_, *backend_, {});
  EXPECT_EQ(s.last_step, 12);
  const auto lines = step_lines(options_.run_dir);
  ASSERT_EQ(lines.size(), 12u);
  LossScaler replay({.enabled = true, .init_scale = options_.initial_loss_scale, .growth_interval = 2});
  int applied = 0;
  for (const auto& line : lines) {
    const int64_t step = line["step"].get<int64_t>();
    EXPECT_EQ(line["loss_scale"].get<double>(), replay.scale()) << "step " << step;
    const bool was_applied = line["applied"].get<bool>();
    if (step <= 3) {
      EXPECT_FALSE(was_applied) << "step " << step;
    }
    // JSON has no inf or nan: a non-finite gradient norm is written as null.
    EXPECT_EQ(was_applied, line["grad_norm"].is_number()) << "step " << step;
    applied += was_applied ? 1 : 0;
    replay.update(!was_applied);
  }
  EXPECT_GE(applied, 4);
  // The checkpoint holds the scaler where the run left it.
  const CheckpointState state = read_checkpoint_state(latest_checkpoint(options_.run_dir / "checkpoints"));
  EXPECT_EQ(state.loss_scale, replay.scale());
  EXPECT_EQ(state.scaler_growth_tracker, replay.growth_tracker());
}

TEST_F(PrecisionRun, ResumesBitExactlyWithItsLossScale) {
  options_.precision = Precision::FP16;
  options_.loss_scale_growth_interval = 2;  // the scale changes across the interruption
  testing::expect_resume_is_bit_exact(options_, dir_, *backend_);
  const auto straight = step_lines(dir_.path() / "straight");
  const auto resumed = step_lines(dir_.path() / "interrupted");
  ASSERT_EQ(resumed.size(), straight.size());
  for (size_t i = 0; i < straight.size(); ++i)
    EXPECT_EQ(resumed[i]["loss_scale"], straight[i]["loss_scale"]) << "step " << straight[i]["step"];
  EXPECT_GT(straight.back()["loss_scale"].get<double>(), options_.initial_loss_scale);

  options_.precision = Precision::BF16;
  const TempDir bf16;
  testing::expect_resume_is_bit_exact(options_, bf16, *backend_);
}

TEST_F(PrecisionRun, AResumeInAnotherPrecisionSaysSo) {
  options_.precision = Precision::FP16;
  options_.loss_scale_growth_interval = 4;
  options_.steps = 6;
  options_.run_dir = dir_.path() / "switch";
  // Stopped as SIGINT stops a run: after step 3 (3 finite steps: growth tracker 3), then 5.
  std::atomic<bool> stop{false};
  int64_t stop_at = 3;
  std::string said;
  TrainObserver observer;
  observer.on_info = [&](std::string_view line) {
    said += line;
    said += "\n";
  };
  observer.on_step = [&](const StepReport& r) { stop = r.step == stop_at; };
  train(options_, *backend_, observer, &stop);
  options_.resume = true;
  stop_at = 5;
  options_.loss_scale_growth_interval = 2;  // the saved tracker (3) is clamped to 1, not refused
  EXPECT_EQ(train(options_, *backend_, observer, &stop).last_step, 5);
  EXPECT_EQ(said.find("continues in"), std::string::npos) << said;
  options_.precision = Precision::BF16;
  train(options_, *backend_, observer, &stop);
  EXPECT_NE(said.find("the checkpoint's run trained in fp16; this one continues in bf16"), std::string::npos)
      << said;
}

TEST_F(PrecisionRun, ADivergingRunStopsWithTheStepAndTheAdvice) {
  options_.schedule.max_lr = 1e30;  // the first update throws the weights past any finite logit
  options_.schedule.min_lr = 1e29;
  options_.adamw.max_grad_norm = 0.0;
  options_.run_dir = dir_.path() / "diverged";
  expect_error([&] { train(options_, *backend_, {}); },
               {"step 2: ", "training diverged", "Lower --lr (now", "--resume"});
  const auto lines = step_lines(options_.run_dir);
  ASSERT_EQ(lines.size(), 2u);  // the failing step is recorded, nothing after it
  EXPECT_TRUE(lines[0]["applied"].get<bool>());

  // fp16: a non-finite loss is not the loss scaler's to handle (the scale does not enter the
  // forward pass): the same stop at step 2.
  options_.precision = Precision::FP16;
  options_.run_dir = dir_.path() / "diverged_fp16";
  expect_error([&] { train(options_, *backend_, {}); },
               {"step 2: the loss is", "at loss scale 65536", "--precision bf16 or fp32"});
  EXPECT_EQ(step_lines(options_.run_dir).size(), 2u);
}

TEST_F(PrecisionRun, BadLossScaleOptionsAreClearErrors) {
  options_.precision = Precision::FP16;
  options_.run_dir = dir_.path() / "bad";
  options_.initial_loss_scale = 0.0;
  expect_error([&] { train(options_, *backend_, {}); }, {"--initial-loss-scale must be a positive number"});
  options_.initial_loss_scale = 1024.0;
  options_.loss_scale_growth_interval = 0;
  expect_error([&] { train(options_, *backend_, {}); }, {"--loss-scale-growth-interval >= 1"});
  expect_error([] { parse_precision("fp64"); }, {"unknown precision 'fp64'", "fp32, bf16 or fp16"});
}

}  // namespace
}  // namespace tokenmill
