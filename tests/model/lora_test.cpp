// LoRA in the TrainingPass (model/lora.h): an adapter with B = 0 leaves the model as it
// is, the adapter's gradients equal finite differences of the loss tensor by tensor (Llama
// with every target, GPT-2 and Qwen2 with f16 base weights), the merged weights W + s B A
// give the adapter forward's loss, activation recomputation gives the same adapter gradients
// bit for bit, and mismatched adapters and targets are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/gradient_check.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/training_pass.h"
#include "support/expect_error.h"
#include "train/lora_parameters.h"

namespace tokenmill {
namespace {

constexpr int64_t kBatch = 2, kSeq = 7;

struct Fixture {
  std::unique_ptr<Model> model;
  LoraConfig lora;
  std::unique_ptr<LoraParameters> adapter;
  std::vector<int32_t> inputs, targets;
};

// The fixture model with an adapter on `targets` (rank 3, alpha 5: scale 5/3), PEFT-initialised.
Fixture make_fixture(const std::string& name, const std::string& targets) {
  Fixture f;
  f.model = Model::load(std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "hf" / name);
  f.lora = {3, 5.0, parse_lora_targets(targets)};
  f.adapter = std::make_unique<LoraParameters>(f.model->config, f.lora);
  f.adapter->init(21);
  std::mt19937_64 rng(11);
  for (int64_t i = 0; i < kBatch * kSeq; ++i) {
    f.inputs.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(f.model->config.vocab_size)));
    f.targets.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(f.model->config.vocab_size)));
  }
  f.targets[5] = -1;  // not scored
  return f;
}

// Gives every B non-zero values (else dA = 0 and the adapter is the identity).
void randomise_b(LoraParameters& adapter, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (const Parameter& p : adapter.parameters()) {
    if (!p.name.ends_with(".lora_B")) continue;
    for (int64_t i = 0; i < p.numel; ++i)
      adapter.values()[static_cast<size_t>(p.offset + i)] =
          static_cast<float>(static_cast<double>(rng() % 2001) / 1000.0 - 1.0) * 0.3f;
  }
}

// One forward_backward of `pass` into the adapter's zeroed gradients: its loss and a copy of them.
struct AdapterGradients {
  double loss = 0.0;
  std::vector<float> grads;
};
AdapterGradients adapter_gradients(TrainingPass& pass, Fixture& f) {
  LoraParameters& ad = *f.adapter;
  ad.zero_grads();
  const double loss =
      pass.forward_backward(f.model->weights, ad.weights(), ad.grads(), f.inputs, f.targets, 1.0f).loss;
  return {loss, {ad.gradients().begin(), ad.gradients().end()}};
}

// Every layer a model's adapters may target (a mixture of experts: its attention's).
const char* all_targets(const std::string& model) {
  if (model == "mixtral" || model == "qwen3_moe") return "q,k,v,o";
  return model == "gpt2" ? "q,k,v,o,up,down" : "q,k,v,o,gate,up,down";
}

class LoraPassTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LoraPassTest, InitialAdapterLeavesTheModelUnchanged) {
  const Fixture f = make_fixture(GetParam(), all_targets(GetParam()));
  auto backend = make_cpu_backend();
  TrainingPass plain(f.model->config, *backend, kBatch, kSeq);
  TrainingPass adapted(f.model->config, *backend, kBatch, kSeq, f.lora);
  const double base = plain.evaluate(f.model->weights, f.inputs, f.targets).loss;
  // B = 0: every adapter term is exactly 0, the loss the same bits.
  EXPECT_EQ(adapted.evaluate(f.model->weights, f.inputs, f.targets, &f.adapter->weights()).loss, base);
  for (const Parameter& p : f.adapter->parameters()) {
    const auto values =
        f.adapter->values().subspan(static_cast<size_t>(p.offset), static_cast<size_t>(p.numel));
    if (p.name.ends_with(".lora_B")) {
      EXPECT_TRUE(std::all_of(values.begin(), values.end(), [](float v) { return v == 0.0f; })) << p.name;
    } else {  // kaiming_uniform_(a = sqrt(5)): |A| <= 1 / sqrt(in), not all zero
      const float bound = 1.0f / std::sqrt(static_cast<float>(p.shape[1]));
      EXPECT_TRUE(std::all_of(values.begin(), values.end(), [&](float v) { return std::fabs(v) <= bound; }));
      EXPECT_TRUE(
          std::any_of(values.begin(), values.end(), [&](float v) { return std::fabs(v) > bound / 2; }));
    }
  }
}

TEST_P(LoraPassTest, AdapterGradientsMatchFiniteDifferencesPerTensor) {
  Fixture f = make_fixture(GetParam(), all_targets(GetParam()));
  randomise_b(*f.adapter, 3);
  auto backend = make_cpu_backend();
  TrainingPass pass(f.model->config, *backend, kBatch, kSeq, f.lora);
  const std::vector<float> grads = adapter_gradients(pass, f).grads;
  LoraParameters& ad = *f.adapter;
  const int measurable = testing::expect_gradients_match_finite_differences(
      ad, grads, [&] { return pass.evaluate(f.model->weights, f.inputs, f.targets, &ad.weights()).loss; },
      GetParam());
  // Not a vacuous check: most adapter tensors move the loss measurably.
  EXPECT_GT(measurable, static_cast<int>(ad.parameters().size()) / 2);
}

TEST_P(LoraPassTest, MergedWeightsGiveTheAdapterForwardsLoss) {
  Fixture f = make_fixture(GetParam(), all_targets(GetParam()));
  randomise_b(*f.adapter, 4);
  auto backend = make_cpu_backend();
  TrainingPass plain(f.model->config, *backend, kBatch, kSeq);
  TrainingPass adapted(f.model->config, *backend, kBatch, kSeq, f.lora);
  const double base = plain.evaluate(f.model->weights, f.inputs, f.targets).loss;
  const double with_adapter =
      adapted.evaluate(f.model->weights, f.inputs, f.targets, &f.adapter->weights()).loss;
  const ModelWeights merged = merge_lora(f.model->config, f.model->weights, f.adapter->weights());
  const double with_merged = plain.evaluate(merged, f.inputs, f.targets).loss;
  EXPECT_GT(std::fabs(with_adapter - base), 1e-3);  // the adapter matters
  EXPECT_NEAR(with_merged, with_adapter, 1e-5 * with_adapter);
}

TEST_P(LoraPassTest, RecomputedActivationsGiveTheSameAdapterGradients) {
  Fixture f = make_fixture(GetParam(), all_targets(GetParam()));
  randomise_b(*f.adapter, 5);
  auto backend = make_cpu_backend();
  TrainingPass kept(f.model->config, *backend, kBatch, kSeq, f.lora);
  TrainingPass recomputed(f.model->config, *backend, kBatch, kSeq, f.lora,
                          TrainingPass::Activations::Recomputed);
  const AdapterGradients expected = adapter_gradients(kept, f);
  EXPECT_EQ(adapter_gradients(recomputed, f).loss, expected.loss);
  EXPECT_GT(testing::expect_bit_identical_gradients(*f.adapter, expected.grads), f.adapter->count() / 2);
}

INSTANTIATE_TEST_SUITE_P(Architectures, LoraPassTest,
                         ::testing::Values("llama", "gpt2", "qwen2", "qwen3", "phi3", "phi4_mini", "olmo2",
                                           "gemma2", "gemma3", "mixtral", "qwen3_moe"));

TEST(LoraPass, GradientsAccumulateAndOnlyTargetedLayersAreAdapted) {
  Fixture f = make_fixture("llama", "v,down");
  randomise_b(*f.adapter, 6);
  auto backend = make_cpu_backend();
  TrainingPass pass(f.model->config, *backend, kBatch, kSeq, f.lora);
  LoraParameters& ad = *f.adapter;
  ad.zero_grads();
  pass.forward_backward(f.model->weights, ad.weights(), ad.grads(), f.inputs, f.targets, 1.0f);
  const std::vector<float> once(ad.gradients().begin(), ad.gradients().end());
  ad.zero_grads();
  for (int i = 0; i < 2; ++i)
    pass.forward_backward(f.model->weights, ad.weights(), ad.grads(), f.inputs, f.targets, 0.5f);
  for (size_t i = 0; i < once.size(); ++i)
    ASSERT_NEAR(ad.gradients()[i], once[i], 1e-6f + 1e-5f * std::fabs(once[i]));
  ASSERT_EQ(ad.parameters().size(), 2u * 2 * 2);  // 2 layers x {v, down} x {A, B}
  EXPECT_EQ(ad.parameters()[0].name, "layers.0.v.lora_A");
  EXPECT_EQ(ad.parameters()[0].shape, (std::vector<int64_t>{3, 64}));
  EXPECT_EQ(ad.parameters()[1].shape, (std::vector<int64_t>{32, 3}));  // v: 2 kv heads x 16
  EXPECT_EQ(ad.parameters()[3].name, "layers.0.down.lora_B");
  EXPECT_EQ(ad.weights().at(0, LoraTarget::Q).a.data, nullptr);
}

TEST(LoraPass, RefusesBadTargetsAndMismatchedAdapters) {
  using testing::expect_error;
  expect_error([] { parse_lora_targets("q,x"); }, {"unknown target 'x'", "q,k,v,o,gate,up,down"});
  expect_error([] { parse_lora_targets("q,q"); }, {"'q' is given twice"});
  expect_error([] { parse_lora_targets(""); }, {"unknown target ''"});
  const Fixture gpt2 = make_fixture("gpt2", "q");
  expect_error(
      [&] {
        LoraParameters(gpt2.model->config, {4, 8.0, {LoraTarget::Gate}});
      },
      {"gpt2 model has no gate projection"});
  expect_error(
      [&] {
        LoraParameters(gpt2.model->config, {0, 8.0, {LoraTarget::Q}});
      },
      {"--lora-rank must be >= 1"});
  auto backend = make_cpu_backend();
  const Fixture llama = make_fixture("llama", "q,v");
  TrainingPass plain(llama.model->config, *backend, kBatch, kSeq);
  expect_error(
      [&] { plain.evaluate(llama.model->weights, llama.inputs, llama.targets, &llama.adapter->weights()); },
      {"pass built without LoRA"});
  TrainingPass other(llama.model->config, *backend, kBatch, kSeq, {3, 5.0, {LoraTarget::Q, LoraTarget::K}});
  expect_error(
      [&] { other.evaluate(llama.model->weights, llama.inputs, llama.targets, &llama.adapter->weights()); },
      {"layer 0 target k is missing"});
}

}  // namespace
}  // namespace tokenmill
