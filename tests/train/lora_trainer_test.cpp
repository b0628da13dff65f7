// LoRA training end to end on the smollm_chat fixture (Llama-style): only the adapter is
// trained and checkpointed, the base model never changes, an interrupted LoRA run resumes
// bit-exactly, a checkpoint of another adapter or base is refused, and `tokenmill train`
// gives clear errors for bad LoRA flags.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/fnv1a.h"
#include "core/mapped_file.h"
#include "model/model.h"
#include "model/training_pass.h"
#include "support/expect_error.h"
#include "support/run_command.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"
#include "train/lora_parameters.h"
#include "train/optimizer.h"
#include "train/parameters.h"
#include "train/tiny_run.h"
#include "train/trainer.h"

namespace tokenmill {
namespace {

using testing::expect_error;
using testing::metrics_losses;
using testing::run_tokenmill;
using testing::TempDir;
using testing::tiny_run_options;

const std::filesystem::path kModelDir = testing::kTinyRunModel;

uint64_t file_hash(const std::filesystem::path& path) {
  const MappedFile file(path);
  return fnv1a(file.bytes().data(), file.bytes().size());
}

class LoraTrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_ = tiny_run_options(dir_);
    options_.from_model = kModelDir;
    options_.lora = {4, 8.0, parse_lora_targets("q,k,v,o,gate,up,down")};
  }
  TempDir dir_;
  TrainOptions options_;
};

TEST_F(LoraTrainerTest, TrainsOnlyTheAdapterAndLearns) {
  const uint64_t base_before = file_hash(kModelDir / "model.safetensors");
  options_.run_dir = dir_.path() / "run";
  auto backend = make_cpu_backend();
  const TrainSummary s = train(options_, *backend, {});
  ASSERT_TRUE(s.first_eval && s.last_eval);
  EXPECT_LT(s.last_eval->loss, s.first_eval->loss - 0.1);
  // 2 layers x 7 targets, A [4, in] + B [out, 4]: q 64+64, k/v 64+32, o 64+64, gate/up 64+128, down 128+64.
  EXPECT_EQ(s.trainable_parameters, 2 * 4 * (128 + 96 + 96 + 128 + 192 + 192 + 192));
  EXPECT_GT(s.parameters, 10 * s.trainable_parameters);  // 106816 vs 8192
  EXPECT_EQ(file_hash(kModelDir / "model.safetensors"), base_before);

  const auto checkpoint = latest_checkpoint(options_.run_dir / "checkpoints");
  const CheckpointState state = read_checkpoint_state(checkpoint);
  EXPECT_EQ(state.lora["rank"], 4);
  EXPECT_EQ(state.lora["targets"], "q,k,v,o,gate,up,down");
  EXPECT_EQ(state.lora["base_model"], std::filesystem::absolute(kModelDir).lexically_normal().string());
  // The file holds the adapter alone: 64-byte-aligned header + 3 arrays of its parameters.
  EXPECT_LT(std::filesystem::file_size(checkpoint), 3 * 4 * s.trainable_parameters + 64 * 1024);
  std::ifstream metrics(options_.run_dir / "metrics.jsonl");
  std::string first;
  std::getline(metrics, first);
  EXPECT_EQ(nlohmann::json::parse(first)["trainable_parameters"], s.trainable_parameters);
}

TEST_F(LoraTrainerTest, InterruptedLoraRunResumesBitExactly) {
  auto backend = make_cpu_backend();
  testing::expect_resume_is_bit_exact(options_, dir_, *backend);
  options_.run_dir = dir_.path() / "interrupted";
  options_.resume = true;
  options_.lora.rank = 2;  // another adapter
  expect_error([&] { train(options_, *backend, {}); }, {"the checkpoint is the LoRA adapter", "\"rank\":4"});
  options_.lora = {};  // full fine-tuning from a LoRA checkpoint
  expect_error([&] { train(options_, *backend, {}); }, {"this run is a full model"});
}

TEST_F(LoraTrainerTest, RefusesLoraWithoutABaseModelOrWithAMissingTarget) {
  auto backend = make_cpu_backend();
  options_.run_dir = dir_.path() / "run";
  options_.from_model.clear();
  options_.scratch_config = scratch_llama_config(512, 2, 32, 4, 2, 64, 32, 2);
  expect_error([&] { train(options_, *backend, {}); }, {"--lora-rank needs --from"});
  options_.from_model = std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "hf" / "gpt2";
  options_.lora.targets = {LoraTarget::Gate};
  expect_error([&] { train(options_, *backend, {}); }, {"no gate projection"});
}

// The pass and the optimizer over a mutable f32 copy of the base model: after AdamW steps on
// the adapter, every base value has its original bits and the adapter has moved.
TEST(LoraTraining, BaseWeightsStayBitIdentical) {
  const auto model = Model::load(kModelDir);
  ParameterSet base(model->config);
  base.load(model->weights);
  const std::vector<float> before(base.values().begin(), base.values().end());
  LoraParameters adapter(model->config, {4, 8.0, parse_lora_targets("q,v,down")});
  adapter.init(1);
  auto backend = make_cpu_backend();
  TrainingPass pass(model->config, *backend, 2, 8, adapter.lora());
  AdamWOptimizer optimizer(AdamWOptions{});
  std::vector<int32_t> in(16), tgt(16);
  for (size_t i = 0; i < in.size(); ++i) {
    in[i] = static_cast<int32_t>(7 * i % 200);
    tgt[i] = static_cast<int32_t>((7 * i + 3) % 200);
  }
  const std::vector<float> adapter_before(adapter.values().begin(), adapter.values().end());
  for (int step = 0; step < 3; ++step) {
    adapter.zero_grads();
    pass.forward_backward(base.weights(), adapter.weights(), adapter.grads(), in, tgt, 1.0f);
    ASSERT_TRUE(optimizer.step(adapter, *backend, 1e-2, 1.0).applied);
  }
  ASSERT_EQ(std::memcmp(before.data(), base.values().data(), before.size() * sizeof(float)), 0);
  EXPECT_TRUE(
      std::all_of(base.gradients().begin(), base.gradients().end(), [](float g) { return g == 0.0f; }));
  size_t moved = 0;
  for (size_t i = 0; i < adapter_before.size(); ++i)
    moved += adapter.values()[i] != adapter_before[i] ? 1 : 0;
  EXPECT_GT(moved, adapter_before.size() * 9 / 10);
}

TEST(LoraTrainCommand, BadLoraFlagsAreClearErrors) {
  const TempDir dir;
  const auto corpus = dir.write("corpus.txt", std::string(400, 'a'));
  const std::string data = (dir.path() / "data").string(), run = (dir.path() / "run").string();
  ASSERT_EQ(
      run_tokenmill("prepare -m " + kModelDir.string() + " --input " + corpus.string() + " --out " + data)
          .exit_code,
      0);
  const std::string train = "train --data " + data + " --out " + run + " --seq-len 8 --batch 1 --steps 1 ";
  const std::string from = "--from " + kModelDir.string() + " ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {from + "--lora-rank 0 --lora-alpha 4", "--lora-rank must be >= 1"},
      {from + "--lora-rank -2", "--lora-rank must be >= 1"},
      {"--lora-rank 4", "--lora-rank needs --from"},
      {from + "--lora-rank 4 --lora-targets q,attn", "unknown target 'attn'"},
      {"--from " + std::string(TOKENMILL_FIXTURES_DIR) + "/hf/gpt2 --lora-rank 4 --lora-targets up,gate",
       "no gate projection"},
      {from + "--lora-rank 4 --lora-alpha -1", "--lora-alpha must be > 0"},
  };
  for (const auto& [flags, message] : cases) {
    const auto r = run_tokenmill(train + flags);
    EXPECT_EQ(r.exit_code, 1) << flags << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << flags << "\n" << r.output;
  }
}

}  // namespace
}  // namespace tokenmill
