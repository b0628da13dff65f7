// Golden comparison with a PyTorch training loop (as llm.c's test): the fixtures in
// tests/fixtures/train_golden (made by make_train_golden.py with torch + transformers in
// float32) hold, for the tiny `llama` (RMSNorm, SwiGLU, RoPE with llama3 scaling, GQA,
// untied lm_head), `gpt2` (LayerNorm, GELU, learned positions, biases, Conv1D + fused
// c_attn, tied embeddings), `qwen3` (llama's layout plus a per-head RMSNorm of q and k
// before RoPE), `olmo2` (norms after attention and MLP, q/k norms over the whole
// projections), `gemma2` (GeGLU, norms on both sides of each block, (1 + w) norms, scaled
// embeddings, 4-position sliding windows on alternate layers, soft-capped scores and logits)
// `gemma3` (Gemma 2's layer without the caps, plus q/k norms and its sliding layers' own
// RoPE base), `mixtral` and `qwen3_moe` (mixtures of experts, trained with transformers'
// load-balancing loss at coefficient 0.02, on a batch where no token's k-th and (k+1)-th router
// probabilities are within 1e-4 at any step) models and a fixed 4 x 16 batch: the loss, every parameter's
// gradient (norm, max |g|, a +-1 projection, sampled elements; small tensors whole), and ten
// torch.optim.AdamW steps with tokenmill's default hyper-parameters (losses, gradient norms,
// parameters after steps 1 and 10). TrainingPass + ParameterSet + AdamWOptimizer must match.
//
// Tolerances. The fixture's "f32_noise" is torch's own float32 loop against float64: loss
// 1e-7, gradients 2e-6 of each tensor's max, step losses 3e-7; a float32 implementation with
// another summation order differs from torch by about as much. So:
//  - loss, every step's loss and gradient norm: 1e-5 relative (~30x the noise);
//  - gradient elements: 1e-5 x the tensor's max |g| (5x the noise); the norm and the +-1
//    projection by the bounds that follow from it (sqrt(n) and n times that);
//  - parameters after step 1: Adam's first step is lr * g / (|g| + eps) = lr * sign(g) plus
//    the decay, so the values agree to float32 rounding (2.5e-7 abs, 2 ulps at 1.0) wherever
//    |g| >= 1e-3 x max |g| (a 1e-5 x max error in g then moves the step by < 1e-9); smaller
//    gradients are rounding noise in both and Adam turns noise into +-lr steps;
//  - parameters after step 10: 3e-5 abs, 2x torch's own float32-vs-float64 spread (7e-6,
//    from those near-zero gradients) for two float32 runs, 1.5% of the 2e-3 an element can
//    move in 10 steps;
//  - a fixture whose own float32 noise is larger than those (Gemma 3's: q/k norms, (1 + w)
//    norms on both sides of each block, gradient norms near 40 make it ill-conditioned: torch's
//    own float32 run is 1.7e-5 of the max away from float64 in its gradients, 2.6e-4 in the
//    later steps' gradient norms) gets 5x that noise instead, each check by its own figure;
//  - a gradient that is zero in exact arithmetic (GPT-2's key biases: softmax ignores a
//    score added to every key) is noise on both sides: ours must be as small as torch's
//    noise (< 1e-6 x the largest gradient), and its parameters are not compared.
// Measured (CPU backend, AVX2 and AVX-512, 1 and 2 threads): loss 9e-8, gradients 1.8e-6 of max, step
// losses 2.9e-7, gradient norms 2.4e-7, parameters 6e-8 after step 1 and 1.6e-7 after step 10.
// Each of these fails it: no weight decay, no clipping, beta2 0.999, eps 1e-6, gradients
// scaled by 1.0001.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/json_file.h"
#include "model/model.h"
#include "model/training_pass.h"
#include "train/lr_schedule.h"
#include "train/optimizer.h"
#include "train/parameters.h"

namespace tokenmill {
namespace {

constexpr double kLossTolerance = 1e-5, kGradTolerance = 1e-5, kStep1Tolerance = 2.5e-7,
                 kStep10Tolerance = 3e-5, kZeroGradBound = 1e-6, kSignificantGrad = 1e-3, kNoiseFactor = 5;

// +1 / -1 by the low bit of splitmix64(i), as make_train_golden.py's signs().
double sign_of(uint64_t i) {
  uint64_t z = i + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return ((z ^ (z >> 31)) & 1) != 0 ? 1.0 : -1.0;
}

struct Golden {
  nlohmann::json doc;
  std::unique_ptr<Model> model;
  std::unique_ptr<ParameterSet> params;
  std::vector<int32_t> inputs, targets;
  int64_t batch = 0, seq_len = 0;

  explicit Golden(const std::string& name)
      : doc(read_json_file(std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "train_golden" /
                           (name + ".json"))),
        model(Model::load(std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "hf" / name)),
        params(std::make_unique<ParameterSet>(model->config)),
        inputs(doc.at("inputs").get<std::vector<int32_t>>()),
        targets(doc.at("targets").get<std::vector<int32_t>>()),
        batch(doc.at("batch").get<int64_t>()),
        seq_len(doc.at("seq_len").get<int64_t>()) {
    params->load(model->weights);
    // A mixture of experts' fixture trains with the load-balancing loss (output_router_logits).
    if (doc.contains("router_aux_loss_coef"))
      model->config.router_aux_loss_coef = doc.at("router_aux_loss_coef").get<double>();
  }

  const Parameter& parameter(const std::string& name) const {
    for (const Parameter& p : params->parameters())
      if (p.name == name) return p;
    ADD_FAILURE() << "no parameter " << name;
    return params->parameters().front();
  }
  std::span<const float> gradient(const Parameter& p) const {
    return std::span<const float>(params->gradients())
        .subspan(static_cast<size_t>(p.offset), static_cast<size_t>(p.numel));
  }
  std::span<const float> values(const Parameter& p) const {
    return std::span<const float>(params->values())
        .subspan(static_cast<size_t>(p.offset), static_cast<size_t>(p.numel));
  }
  // The fixed tolerance, or 5x the fixture's own float32 noise `key` where that is larger.
  double tolerance(double fixed, const char* key) const {
    return std::max(fixed, kNoiseFactor * doc.at("f32_noise").at(key).get<double>());
  }
  double largest_gradient() const {
    double m = 0.0;
    for (const auto& t : doc.at("tensors")) m = std::max(m, t.at("grad_max_abs").get<double>());
    return m;
  }
};

void expect_relative(double got, double expected, double tolerance, const std::string& what) {
  EXPECT_LE(std::fabs(got - expected), tolerance * std::fabs(expected))
      << what << ": got " << got << ", PyTorch " << expected;
}

// The fixture covers every parameter, with the same shapes and weight-decay flags.
void expect_same_parameters(const Golden& g) {
  const auto& tensors = g.doc.at("tensors");
  ASSERT_EQ(tensors.size(), g.params->parameters().size());
  for (const auto& t : tensors) {
    const Parameter& p = g.parameter(t.at("name"));
    EXPECT_EQ(p.shape, t.at("shape").get<std::vector<int64_t>>()) << p.name;
    EXPECT_EQ(p.decay, t.at("decay").get<bool>()) << p.name;
  }
}

// Parameter values at the fixture's sampled indices against `key` ("param_step1" or
// "param_after"), skipping tensors with an exactly-zero gradient and, when significant_only,
// elements whose gradient is below kSignificantGrad of the tensor's max.
void expect_parameters(const Golden& g, const char* key, double tolerance, bool significant_only) {
  for (const auto& t : g.doc.at("tensors")) {
    if (t.at("exact_zero_grad").get<bool>()) continue;
    const Parameter& p = g.parameter(t.at("name"));
    const std::span<const float> values = g.values(p);
    const auto index = t.at("index").get<std::vector<int64_t>>();
    const auto expected = t.at(key).get<std::vector<double>>();
    const auto grad = t.at("grad").get<std::vector<double>>();
    const double max_grad = t.at("grad_max_abs").get<double>();
    for (size_t i = 0; i < index.size(); ++i) {
      if (significant_only && std::fabs(grad[i]) < kSignificantGrad * max_grad) continue;
      EXPECT_NEAR(values[static_cast<size_t>(index[i])], expected[i], tolerance)
          << key << " " << p.name << "[" << index[i] << "]";
    }
  }
}

class TrainGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainGolden, LossAndGradientsMatchPyTorch) {
  Golden g(GetParam());
  expect_same_parameters(g);
  auto backend = make_cpu_backend();
  TrainingPass pass(g.model->config, *backend, g.batch, g.seq_len);
  g.params->zero_grads();
  const TrainingPass::Result r =
      pass.forward_backward(g.params->weights(), g.params->grads(), g.inputs, g.targets, 1.0f);
  expect_relative(r.loss, g.doc.at("loss").get<double>(), g.tolerance(kLossTolerance, "loss"), "loss");
  EXPECT_EQ(r.tokens, g.batch * g.seq_len - 1);  // one target is not scored
  const double largest = g.largest_gradient();
  for (const auto& t : g.doc.at("tensors")) {
    const Parameter& p = g.parameter(t.at("name"));
    const std::span<const float> grad = g.gradient(p);
    double sum_squares = 0.0, max_abs = 0.0, sign_dot = 0.0;
    for (size_t i = 0; i < grad.size(); ++i) {
      sum_squares += static_cast<double>(grad[i]) * grad[i];
      max_abs = std::max(max_abs, static_cast<double>(std::fabs(grad[i])));
      sign_dot += sign_of(i) * grad[i];
    }
    if (t.at("exact_zero_grad").get<bool>()) {
      EXPECT_LT(max_abs, kZeroGradBound * largest) << p.name << " should be zero up to rounding";
      continue;
    }
    const double relative = g.tolerance(kGradTolerance, "grad_rel_to_max");
    const double torch_max = t.at("grad_max_abs").get<double>(), tolerance = relative * torch_max;
    const auto n = static_cast<double>(p.numel);
    expect_relative(max_abs, torch_max, relative, p.name + " max |grad|");
    EXPECT_NEAR(std::sqrt(sum_squares), t.at("grad_norm").get<double>(), std::sqrt(n) * tolerance)
        << p.name << " gradient norm";
    EXPECT_NEAR(sign_dot, t.at("grad_sign_dot").get<double>(), n * tolerance) << p.name << " +-1 projection";
    const auto index = t.at("index").get<std::vector<int64_t>>();
    const auto expected = t.at("grad").get<std::vector<double>>();
    for (size_t i = 0; i < index.size(); ++i)
      EXPECT_NEAR(grad[static_cast<size_t>(index[i])], expected[i], tolerance)
          << p.name << "[" << index[i] << "]";
  }
}

TEST_P(TrainGolden, TenAdamWStepsTrackPyTorch) {
  Golden g(GetParam());
  const nlohmann::json& o = g.doc.at("optimizer");
  // The fixture was made with tokenmill's defaults (optimizer and `tokenmill train`'s lr).
  const AdamWOptions defaults;
  ASSERT_EQ(o.at("beta1").get<double>(), defaults.beta1);
  ASSERT_EQ(o.at("beta2").get<double>(), defaults.beta2);
  ASSERT_EQ(o.at("eps").get<double>(), defaults.eps);
  ASSERT_EQ(o.at("weight_decay").get<double>(), defaults.weight_decay);
  ASSERT_EQ(o.at("max_grad_norm").get<double>(), defaults.max_grad_norm);
  LrSchedule schedule;
  ASSERT_EQ(o.at("lr").get<double>(), schedule.max_lr);
  schedule.min_lr = o.at("min_lr").get<double>();
  schedule.warmup_steps = o.at("warmup_steps").get<int64_t>();
  schedule.total_steps = o.at("total_steps").get<int64_t>();
  schedule.decay = parse_lr_decay(o.at("decay").get<std::string>());
  schedule.validate();

  auto backend = make_cpu_backend();
  TrainingPass pass(g.model->config, *backend, g.batch, g.seq_len);
  AdamWOptimizer optimizer(defaults);
  const auto losses = g.doc.at("step_losses").get<std::vector<double>>();
  const auto norms = g.doc.at("step_grad_norms").get<std::vector<double>>();
  const auto lrs = g.doc.at("step_lrs").get<std::vector<double>>();
  ASSERT_EQ(static_cast<int64_t>(losses.size()), schedule.total_steps);
  for (int64_t step = 1; step <= schedule.total_steps; ++step) {
    const auto i = static_cast<size_t>(step - 1);
    const std::string at = "step " + std::to_string(step);
    expect_relative(schedule.at(step), lrs[i], 1e-12, at + " lr");
    g.params->zero_grads();
    const double loss =
        pass.forward_backward(g.params->weights(), g.params->grads(), g.inputs, g.targets, 1.0f).loss;
    const AdamWOptimizer::StepResult r = optimizer.step(*g.params, *backend, schedule.at(step), 1.0);
    ASSERT_TRUE(r.applied) << at;
    expect_relative(loss, losses[i], g.tolerance(kLossTolerance, "step_losses"), at + " loss");
    expect_relative(r.grad_norm, norms[i], g.tolerance(kLossTolerance, "grad_norms"), at + " gradient norm");
    if (step == 1) expect_parameters(g, "param_step1", kStep1Tolerance, true);
  }
  expect_relative(pass.evaluate(g.params->weights(), g.inputs, g.targets).loss,
                  g.doc.at("final_loss").get<double>(), g.tolerance(kLossTolerance, "step_losses"),
                  "loss after the last step");
  expect_parameters(g, "param_after", g.tolerance(kStep10Tolerance, "params_after_abs"), false);
}

INSTANTIATE_TEST_SUITE_P(Models, TrainGolden,
                         ::testing::Values("llama", "gpt2", "qwen3", "olmo2", "gemma2", "gemma3", "mixtral",
                                           "qwen3_moe"));

}  // namespace
}  // namespace tokenmill
