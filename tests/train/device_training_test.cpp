// Training on a backend whose memory the host cannot touch (FencedBackend: the CPU backend
// behind PROT_NONE pages, opened only inside ops and copies), as a GPU backend's memory is:
// runs from scratch, with recomputed activations, in bf16 / fp16 precision (the matrices'
// compute copy and its refresh live there too) and LoRA fine-tuning must give the plain
// CPU backend's losses, gradient norms, validation losses, samples and checkpoint files bit
// for bit, and resume bit-exactly from a checkpoint written there. Any host access to the
// parameters, gradients, moments or activations would be a SIGSEGV instead.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/fenced_backend.h"
#include "model/lora.h"
#include "model/training_pass.h"
#include "model/transformer.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"
#include "train/parameters.h"
#include "train/tiny_run.h"
#include "train/trainer.h"

namespace tokenmill {
namespace {

using testing::expect_error;
using testing::FencedBackend;
using testing::TempDir;
using testing::tiny_run_options;

// What a run reports, and the text of its samples.
struct Trace {
  std::vector<double> losses, grad_norms, val_losses;
  std::vector<std::string> samples;
  bool operator==(const Trace&) const = default;
};

// Ten greedy tokens after token 2, with the backend the run trains on (as the CLI samples).
std::string greedy_sample(const Model& model, Backend& backend) {
  Transformer transformer(model, backend, 16);
  int32_t token = 2;
  std::string ids;
  for (int i = 0; i < 10; ++i) {
    const Tensor logits = transformer.forward_last({&token, 1});
    const float* l = logits.as<const float>();
    token = static_cast<int32_t>(std::max_element(l, l + logits.numel()) - l);
    ids += std::to_string(token) + " ";
  }
  return ids;
}

Trace run(const TrainOptions& options, Backend& backend) {
  Trace trace;
  TrainObserver observer;
  observer.on_step = [&](const StepReport& r) {
    trace.losses.push_back(r.loss);
    trace.grad_norms.push_back(r.grad_norm);
  };
  observer.on_eval = [&](const EvalReport& r) { trace.val_losses.push_back(r.loss); };
  observer.sample = [&](const Model& model, int64_t) {
    trace.samples.push_back(greedy_sample(model, backend));
    return trace.samples.back();
  };
  train(options, backend, observer);
  return trace;
}

std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

class DeviceTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    options_ = tiny_run_options(dir_);
    options_.scratch_config = scratch_llama_config(512, 2, 32, 4, 2, 64, 32, 2);
    options_.sample_every = 3;
  }

  // Runs options_ on the CPU backend and on the fenced one (in run directories cpu_<name>
  // and fenced_<name>): the traces and the final checkpoint files must be equal.
  void expect_fenced_run_equals_cpu(const std::string& name) {
    auto cpu = make_cpu_backend();
    options_.run_dir = dir_.path() / ("cpu_" + name);
    const Trace want = run(options_, *cpu);
    const int ops_before = fenced_.ops();
    options_.run_dir = dir_.path() / ("fenced_" + name);
    const Trace got = run(options_, fenced_);
    EXPECT_GT(fenced_.ops(), ops_before);
    ASSERT_EQ(want.losses.size(), static_cast<size_t>(options_.steps));
    ASSERT_EQ(want.samples.size(), 2u);  // at step 3 and at the end
    EXPECT_EQ(got.losses, want.losses);
    EXPECT_EQ(got.grad_norms, want.grad_norms);
    EXPECT_EQ(got.val_losses, want.val_losses);
    EXPECT_EQ(got.samples, want.samples);
    const std::string checkpoint =
        file_bytes(latest_checkpoint(dir_.path() / ("cpu_" + name) / "checkpoints"));
    EXPECT_FALSE(checkpoint.empty());
    EXPECT_TRUE(file_bytes(latest_checkpoint(options_.run_dir / "checkpoints")) == checkpoint)
        << "the checkpoints differ";
  }

  // Declared first, destroyed last: the runs' buffers live in its memory.
  FencedBackend fenced_{make_cpu_backend()};
  TempDir dir_;
  TrainOptions options_;
};

TEST_F(DeviceTraining, FromScratchGivesTheCpuRunBitForBit) {
  expect_fenced_run_equals_cpu("scratch");
  EXPECT_GT(fenced_.fenced_memory().bytes_in(), 0u);   // initial values
  EXPECT_GT(fenced_.fenced_memory().bytes_out(), 0u);  // losses, checkpoints
}

TEST_F(DeviceTraining, ACheckpointWrittenThereResumesBitExactly) {
  testing::expect_resume_is_bit_exact(options_, dir_, fenced_);
}

TEST_F(DeviceTraining, RecomputedActivationsGiveTheCpuRunAndResume) {
  options_.recompute_activations = true;
  expect_fenced_run_equals_cpu("recomputed");
  testing::expect_resume_is_bit_exact(options_, dir_, fenced_, true);
}

TEST_F(DeviceTraining, ReducedPrecisionGivesTheCpuRunAndResumes) {
  for (const Precision precision : {Precision::BF16, Precision::FP16}) {
    options_.precision = precision;
    expect_fenced_run_equals_cpu(std::string(precision_name(precision)));
  }
  testing::expect_resume_is_bit_exact(options_, dir_, fenced_);  // fp16: with its loss scale
}

TEST_F(DeviceTraining, LoraFineTuningGivesTheCpuRunAndResumes) {
  options_.from_model = testing::kTinyRunModel;
  options_.lora = {4, 8.0, parse_lora_targets("q,k,v,o,gate,up,down")};
  expect_fenced_run_equals_cpu("lora");
  testing::expect_resume_is_bit_exact(options_, dir_, fenced_);
  options_.precision = Precision::BF16;  // the frozen model multiplied as a bf16 copy
  expect_fenced_run_equals_cpu("lora_bf16");
}

// A mixture of experts from scratch, with the load-balancing loss: its routing reads the
// router's scores and its backward the experts' outputs through the memory's copies only.
TEST_F(DeviceTraining, AMixtureOfExpertsGivesTheCpuRunAndResumes) {
  options_.scratch_config["architectures"] = {"MixtralForCausalLM"};
  options_.scratch_config["num_local_experts"] = 4;
  options_.scratch_config["num_experts_per_tok"] = 2;
  options_.scratch_config["output_router_logits"] = true;
  options_.scratch_config["router_aux_loss_coef"] = 0.02;
  expect_fenced_run_equals_cpu("experts");
  testing::expect_resume_is_bit_exact(options_, dir_, fenced_);
}

TEST_F(DeviceTraining, FullFineTuningGivesTheCpuRun) {
  options_.from_model = testing::kTinyRunModel;
  expect_fenced_run_equals_cpu("full");
}

TEST_F(DeviceTraining, ParametersAndPassBuffersLiveInTheBackendsMemory) {
  const ModelConfig config = parse_model_config(options_.scratch_config, "test config");
  ParameterSet host(config);
  const int allocations = fenced_.fenced_memory().allocations();
  TrainingPass pass(config, fenced_, 1, 4);
  EXPECT_EQ(fenced_.fenced_memory().allocations(), allocations + 1);  // its arena
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  expect_error([&] { pass.forward_backward(host.weights(), host.grads(), tokens, tokens, 1.0f); },
               {"not in the memory of the fenced-cpu backend", "place_weights"});
  ParameterSet placed(config, &fenced_);
  placed.init_gpt2(1);
  for (const std::span<const float> buffer :
       {placed.values(), placed.gradients(), placed.first_moments(), placed.second_moments()})
    EXPECT_TRUE(fenced_.fenced_memory().owns(buffer.data()));
  EXPECT_EQ(placed.weights().memory, &fenced_.memory());
  EXPECT_GT(pass.forward_backward(placed.weights(), placed.grads(), tokens, tokens, 1.0f).loss, 0.0);
}

// A model of more than ParameterBuffers::kChunkFloats parameters: initialisation, zeroing,
// checkpoint writing and loading cross the chunk boundaries (the last chunk partial).
TEST_F(DeviceTraining, BuffersLargerThanAChunkMoveWhole) {
  const ModelConfig config =
      parse_model_config(scratch_llama_config(512, 2, 512, 4, 2, 2048, 32, 2), "test config");
  ParameterSet host(config), device(config, &fenced_);
  ASSERT_GT(static_cast<size_t>(device.count()), ParameterBuffers::kChunkFloats);
  ASSERT_NE(static_cast<size_t>(device.count()) % ParameterBuffers::kChunkFloats, 0u);
  host.init_gpt2(7);
  device.init_gpt2(7);
  const std::vector<float> ones(static_cast<size_t>(device.count()), 1.0f);
  device.upload(device.gradients(), ones);
  device.zero_grads();
  std::vector<float> got(ones.size());
  device.download(device.gradients(), got);
  EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float g) { return g == 0.0f; }));

  CheckpointState state;
  const auto from_host = save_checkpoint(dir_.path() / "host", state, host, 1);
  const auto from_device = save_checkpoint(dir_.path() / "device", state, device, 1);
  EXPECT_TRUE(file_bytes(from_device) == file_bytes(from_host)) << "the checkpoints differ";
  ParameterSet loaded(config, &fenced_);
  load_checkpoint(from_host, loaded);
  loaded.download(loaded.values(), got);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), host.values().begin(), host.values().end()));
}

}  // namespace
}  // namespace tokenmill
