// Training on the CUDA backend (a GPU, or the CUDA emulation in the cuda-emu, asan and tsan
// builds): from scratch in fp32, bf16 and fp16 (with dynamic loss scaling), with recomputed
// activations, and LoRA fine-tuning must track the CPU backend's run, and a checkpoint
// written there must resume bit-exactly on the same backend.
//
// Tolerances: cuBLASLt and the CUDA kernels sum in other orders than the CPU backend, so the
// fp32 losses agree to a relative 1e-4 over the run. In bf16 / fp16 the CUDA backend also
// rounds the activations to the compute dtype (tensor cores read both operands in it; the CPU
// widens the weights and multiplies f32 activations), so those runs agree to 2e-2.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda_availability.h"
#include "model/lora.h"
#include "support/gpu_devices.h"
#include "support/temp_dir.h"
#include "train/tiny_run.h"
#include "train/trainer.h"

namespace tokenmill {
namespace {

using testing::TempDir;
using testing::tiny_run_options;

std::vector<double> losses_of(const TrainOptions& options, Backend& backend) {
  std::vector<double> losses;
  TrainObserver observer;
  observer.on_step = [&](const StepReport& r) { losses.push_back(r.loss); };
  train(options, backend, observer);
  return losses;
}

class CudaTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::cuda_usable()) GTEST_SKIP() << cuda_unavailable_reason();
    options_ = tiny_run_options(dir_);
    options_.scratch_config = scratch_llama_config(512, 2, 32, 4, 2, 64, 32, 2);
  }

  // Runs options_ on the CPU and on GPU 0 (run directories cpu_<name>, cuda_<name>).
  void expect_cuda_run_tracks_cpu(const std::string& name, double tolerance) {
    auto cpu = make_cpu_backend();
    options_.run_dir = dir_.path() / ("cpu_" + name);
    const std::vector<double> want = losses_of(options_, *cpu);
    auto cuda = make_cuda_backend(0);
    options_.run_dir = dir_.path() / ("cuda_" + name);
    const std::vector<double> got = losses_of(options_, *cuda);
    ASSERT_EQ(got.size(), want.size());
    ASSERT_EQ(want.size(), static_cast<size_t>(options_.steps));
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(got[i], want[i], tolerance * std::abs(want[i])) << "step " << i + 1;
    EXPECT_LT(got.back(), got.front());  // it learns
  }

  TempDir dir_;
  TrainOptions options_;
};

TEST_F(CudaTraining, FromScratchInFp32TracksTheCpuAndResumesBitExactly) {
  expect_cuda_run_tracks_cpu("fp32", 1e-4);
  auto cuda = make_cuda_backend(0);
  testing::expect_resume_is_bit_exact(options_, dir_, *cuda);
}

TEST_F(CudaTraining, RecomputedActivationsChangeNoBit) {
  options_.recompute_activations = true;
  expect_cuda_run_tracks_cpu("recomputed", 1e-4);
  auto cuda = make_cuda_backend(0);
  testing::expect_resume_is_bit_exact(options_, dir_, *cuda, /*flip_recompute=*/true);
}

TEST_F(CudaTraining, Bf16AndFp16WithLossScalingTrackTheCpu) {
  for (const Precision precision : {Precision::BF16, Precision::FP16}) {
    SCOPED_TRACE(precision_name(precision));
    options_.precision = precision;
    expect_cuda_run_tracks_cpu(std::string(precision_name(precision)), 2e-2);
  }
  auto cuda = make_cuda_backend(0);
  testing::expect_resume_is_bit_exact(options_, dir_, *cuda);  // fp16: with its loss scale
}

TEST_F(CudaTraining, AMixtureOfExpertsTracksTheCpu) {
  options_.scratch_config["architectures"] = {"MixtralForCausalLM"};
  options_.scratch_config["num_local_experts"] = 4;
  options_.scratch_config["num_experts_per_tok"] = 2;
  options_.scratch_config["output_router_logits"] = true;
  expect_cuda_run_tracks_cpu("experts", 1e-4);
}

TEST_F(CudaTraining, LoraFineTuningTracksTheCpu) {
  options_.from_model = testing::kTinyRunModel;
  options_.lora = {4, 8.0, parse_lora_targets("q,k,v,o,gate,up,down")};
  expect_cuda_run_tracks_cpu("lora", 1e-4);
}

}  // namespace
}  // namespace tokenmill
