// TrainingPass: its forward loss equals the inference Transformer's cross-entropy, and its
// gradients equal finite differences of that loss, tensor by tensor, for a Llama (RMSNorm,
// SwiGLU, RoPE, GQA), a GPT-2 (LayerNorm, GELU, learned positions, biases), a Qwen2 (q/k/v
// biases, f16 weights loaded into the f32 master copy), Qwen3, Phi-3, OLMo 2 and Gemma 2 / 3
// (GeGLU, norms on both sides, (1 + w) norms, scaled embeddings, sliding windows shorter than
// the sequences, soft-capped scores and logits) fixture models. With activation
// recomputation, the loss, the gradients and the evaluation are the same bits, and the
// activation memory is (layers - 1) x one layer's activations smaller.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/arena.h"
#include "model/gradient_check.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/training_pass.h"
#include "model/transformer.h"
#include "support/expect_error.h"
#include "train/parameters.h"

namespace tokenmill {
namespace {

constexpr int64_t kBatch = 2, kSeq = 7;

struct Fixture {
  std::unique_ptr<Model> model;
  std::unique_ptr<ParameterSet> params;
  std::vector<int32_t> inputs, targets;
};

Fixture make_fixture(const std::string& name) {
  Fixture f;
  f.model = Model::load(std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "hf" / name);
  f.params = std::make_unique<ParameterSet>(f.model->config);
  f.params->load(f.model->weights);
  std::mt19937_64 rng(11);
  for (int64_t i = 0; i < kBatch * kSeq; ++i) {
    f.inputs.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(f.model->config.vocab_size)));
    f.targets.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(f.model->config.vocab_size)));
  }
  f.targets[3] = -1;  // not scored
  return f;
}

// Mean cross-entropy of the inference Transformer's logits, in double, over an f32 KV cache
// (the training pass's attention is f32; a 16-bit model's default cache would be f16).
double inference_loss(const Fixture& f, Backend& backend) {
  const int64_t vocab = f.model->config.vocab_size;
  double total = 0.0;
  int64_t count = 0;
  for (int64_t b = 0; b < kBatch; ++b) {
    Transformer tf(*f.model, backend, kSeq, Transformer::kDefaultChunkTokens, DType::F32);
    std::vector<float> logits(static_cast<size_t>(kSeq * vocab));
    tf.forward_all(std::span(f.inputs).subspan(static_cast<size_t>(b * kSeq), kSeq), logits);
    for (int64_t t = 0; t < kSeq; ++t) {
      const int32_t target = f.targets[static_cast<size_t>(b * kSeq + t)];
      if (target < 0) continue;
      const float* row = logits.data() + t * vocab;
      double max = row[0], sum = 0.0;
      for (int64_t j = 1; j < vocab; ++j) max = std::max<double>(max, row[j]);
      for (int64_t j = 0; j < vocab; ++j) sum += std::exp(row[j] - max);
      total += max + std::log(sum) - row[target];
      ++count;
    }
  }
  return total / static_cast<double>(count);
}

// Zeroed gradients, then one forward_backward per grad_scale; the gradients that result.
std::vector<float> gradients(TrainingPass& pass, Fixture& f, std::initializer_list<float> scales) {
  ParameterSet& ps = *f.params;
  ps.zero_grads();
  for (const float scale : scales)
    pass.forward_backward(ps.weights(), ps.grads(), f.inputs, f.targets, scale);
  return {ps.gradients().begin(), ps.gradients().end()};
}

class TrainingPassTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainingPassTest, ForwardLossMatchesTheInferenceTransformer) {
  const Fixture f = make_fixture(GetParam());
  auto backend = make_cpu_backend();
  TrainingPass pass(f.model->config, *backend, kBatch, kSeq);
  const TrainingPass::Result r = pass.evaluate(f.params->weights(), f.inputs, f.targets);
  EXPECT_EQ(r.tokens, kBatch * kSeq - 1);
  // The fixture's own weights (possibly f16) and the f32 master copy hold the same values.
  EXPECT_NEAR(r.loss, inference_loss(f, *backend), 2e-5 * r.loss);
}

TEST_P(TrainingPassTest, GradientsMatchFiniteDifferencesPerTensor) {
  Fixture f = make_fixture(GetParam());
  auto backend = make_cpu_backend();
  TrainingPass pass(f.model->config, *backend, kBatch, kSeq);
  ParameterSet& ps = *f.params;
  const std::vector<float> grads = gradients(pass, f, {1.0f});
  testing::expect_gradients_match_finite_differences(
      ps, grads, [&] { return pass.evaluate(ps.weights(), f.inputs, f.targets).loss; }, GetParam());
}

TEST_P(TrainingPassTest, AccumulatedHalvesEqualOneFullStep) {
  Fixture f = make_fixture(GetParam());
  auto backend = make_cpu_backend();
  TrainingPass pass(f.model->config, *backend, kBatch, kSeq);
  const std::vector<float> once = gradients(pass, f, {1.0f});
  const std::vector<float> halves = gradients(pass, f, {0.5f, 0.5f});
  for (size_t i = 0; i < once.size(); ++i)
    ASSERT_NEAR(halves[i], once[i], 1e-6f + 1e-5f * std::fabs(once[i]));
}

TEST_P(TrainingPassTest, RecomputedActivationsGiveTheSameBits) {
  Fixture f = make_fixture(GetParam());
  auto backend = make_cpu_backend();
  TrainingPass kept(f.model->config, *backend, kBatch, kSeq);
  TrainingPass recomputed(f.model->config, *backend, kBatch, kSeq, {}, TrainingPass::Activations::Recomputed);
  ParameterSet& ps = *f.params;
  ps.zero_grads();
  const double loss = kept.forward_backward(ps.weights(), ps.grads(), f.inputs, f.targets, 0.5f).loss;
  const std::vector<float> expected(ps.gradients().begin(), ps.gradients().end());
  ps.zero_grads();
  EXPECT_EQ(recomputed.forward_backward(ps.weights(), ps.grads(), f.inputs, f.targets, 0.5f).loss, loss);
  EXPECT_GT(testing::expect_bit_identical_gradients(ps, expected), ps.count() / 2);
  EXPECT_EQ(recomputed.evaluate(ps.weights(), f.inputs, f.targets).loss,
            kept.evaluate(ps.weights(), f.inputs, f.targets).loss);
}

// One layer's activation buffers (training_pass.h): h1, mid, h2 [rows, hidden] (post-norms:
// mid, o_raw, down_raw; sandwich norms: all five); q and attended [rows, heads x head_dim]; k,
// v [rows, kv_heads x head_dim]; with q/k norms q and k again (before the norm); a, act and a
// gated MLP's b [rows, ff]; a LoRA u [rows, rank] per target.
size_t layer_activation_bytes(const ModelConfig& c, int64_t rows, const LoraConfig& lora) {
  const auto f32 = [&](int64_t cols) {
    return Arena::footprint(static_cast<size_t>(rows * cols) * sizeof(float));
  };
  const int64_t q_width = c.num_attention_heads * c.head_dim, kv_width = c.num_key_value_heads * c.head_dim;
  const size_t head_norms = c.qk_norm != QkNorm::None ? f32(q_width) + f32(kv_width) : 0;
  const auto slots = [&](int64_t cols) {  // a mixture of experts' MLP has a row per slot
    return Arena::footprint(static_cast<size_t>(rows * c.experts_per_token * cols) * sizeof(float));
  };
  const size_t mlp = c.mixture_of_experts()
                         ? 3 * slots(c.mlp_width()) + 2 * slots(c.hidden_size) + f32(c.num_experts)
                         : (gated_mlp(c.mlp) ? 3 : 2) * f32(c.intermediate_size);
  return (c.sandwich_norms ? 5 : 3) * f32(c.hidden_size) + 2 * f32(q_width) + 2 * f32(kv_width) + head_norms +
         mlp + lora.targets.size() * f32(lora.rank);
}

TEST_P(TrainingPassTest, RecomputationKeepsOneLayersActivations) {
  const Fixture f = make_fixture(GetParam());
  const ModelConfig& c = f.model->config;
  auto backend = make_cpu_backend();
  const char* targets = GetParam() == "gpt2" ? "q,v,up" : c.mixture_of_experts() ? "q,v,o" : "q,v,gate,down";
  const LoraConfig lora{4, 8.0, parse_lora_targets(targets)};
  for (const LoraConfig& l : {LoraConfig{}, lora}) {
    const TrainingPass kept(c, *backend, kBatch, kSeq, l);
    const TrainingPass recomputed(c, *backend, kBatch, kSeq, l, TrainingPass::Activations::Recomputed);
    ASSERT_GE(c.num_hidden_layers, 2);
    EXPECT_EQ(kept.activation_bytes() - recomputed.activation_bytes(),
              static_cast<size_t>(c.num_hidden_layers - 1) * layer_activation_bytes(c, kBatch * kSeq, l))
        << "LoRA rank " << l.rank;
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, TrainingPassTest,
                         ::testing::Values("llama", "gpt2", "qwen2", "qwen3", "phi3", "phi4_mini", "olmo2",
                                           "gemma2", "gemma3", "mixtral", "qwen3_moe"));

TEST(TrainingPass, MixturesOfExpertsAdaptOnlyTheirAttention) {
  for (const char* name : {"mixtral", "qwen3_moe"}) {
    const auto model = Model::load(std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "hf" / name);
    const ModelConfig& c = model->config;
    check_lora_config(c, LoraConfig{4, 8.0, parse_lora_targets("q,k,v,o")});
    for (const char* experts : {"q,gate", "up", "v,down"})
      testing::expect_error(
          [&] {
            check_lora_config(c, LoraConfig{4, 8.0, parse_lora_targets(experts)});
          },
          {c.architecture, "mixture of experts", "q,k,v,o"});
  }
}

TEST(TrainingPass, RefusesBadBatches) {
  const Fixture f = make_fixture("llama");
  auto backend = make_cpu_backend();
  testing::expect_error([&] { TrainingPass(f.model->config, *backend, 1, 100000); },
                        {"exceeds the model's context"});
  TrainingPass pass(f.model->config, *backend, kBatch, kSeq);
  std::vector<int32_t> short_inputs(3, 1);
  testing::expect_error([&] { pass.evaluate(f.params->weights(), short_inputs, f.targets); },
                        {"must hold 2 x 7"});
  std::vector<int32_t> unscored(f.targets.size(), -1);
  testing::expect_error([&] { pass.evaluate(f.params->weights(), f.inputs, unscored); }, {"no target"});
}

}  // namespace
}  // namespace tokenmill
