// FLOPs and parameter counts against numbers worked out by hand (the arithmetic is in the
// comments), and against Model::parameter_count() of the fixture models.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "measure/flops.h"
#include "model/model.h"
#include "model/shape_presets.h"
#include "support/expect_error.h"

namespace tokenmill {
namespace {

// GPT-2 124M as in its config.json (the --shape preset; shape_presets_test checks its figures).
const ModelConfig& gpt2_124m() { return shape_preset("gpt2-124m").config; }

// A small Llama with GQA: hidden 256, 8 heads of 32, 2 kv heads, MLP 512, 2 layers,
// vocab 1000, untied lm_head, context 512, no biases.
ModelConfig small_gqa_llama() {
  return parse_model_config({{"architectures", {"LlamaForCausalLM"}},
                             {"vocab_size", 1000},
                             {"hidden_size", 256},
                             {"intermediate_size", 512},
                             {"num_hidden_layers", 2},
                             {"num_attention_heads", 8},
                             {"num_key_value_heads", 2},
                             {"max_position_embeddings", 512},
                             {"rms_norm_eps", 1e-5},
                             {"tie_word_embeddings", false}},
                            "llama.json");
}

TEST(Flops, Gpt2ParameterCount) {
  // wte 50257 x 768 = 38,597,376;  wpe 1024 x 768 = 786,432.
  // Per layer: ln_1 2 x 768 = 1,536; c_attn 768 x 2304 + 2304 = 1,771,776;
  //   attn c_proj 768 x 768 + 768 = 590,592; ln_2 1,536; c_fc 768 x 3072 + 3072 = 2,362,368;
  //   mlp c_proj 3072 x 768 + 768 = 2,360,064; sum 7,087,872; x 12 = 85,054,464.
  // ln_f 1,536; lm_head tied to wte.
  // 38,597,376 + 786,432 + 85,054,464 + 1,536 = 124,439,808.
  EXPECT_EQ(parameter_count(gpt2_124m()), 124'439'808);
}

TEST(Flops, Gpt2MatmulParameters) {
  // Per layer: q, k, v 3 x 768 x 768 = 1,769,472; o 589,824; MLP 2 x 768 x 3072 = 4,718,592;
  // sum 7,077,888; x 12 = 84,934,656; lm_head 50257 x 768 = 38,597,376 -> 123,532,032.
  EXPECT_EQ(matmul_parameters(gpt2_124m()), 123'532'032);
}

TEST(Flops, Gpt2ForwardOfOneTokenAtTheEndOfTheContext) {
  // The token at position 1023 attends 1024 positions:
  // 2 x 123,532,032 + 4 x 12 layers x 12 heads x 64 x 1024 = 247,064,064 + 37,748,736.
  EXPECT_DOUBLE_EQ(forward_flops(gpt2_124m(), 1023, 1, 1), 284'812'800.0);
}

TEST(Flops, ASlidingWindowCapsThePositionsEachTokenAttends) {
  // A window of 4: positions 0..2 attend 1, 2, 3, every later one 4.
  EXPECT_EQ(attended_positions(0, 10, 4), 1 + 2 + 3 + 7 * 4);
  EXPECT_EQ(attended_positions(2, 3, 4), 3 + 4 + 4);
  EXPECT_EQ(attended_positions(100, 5, 4), 5 * 4);
  EXPECT_EQ(attended_positions(0, 3, 4), attended_positions(0, 3));
}

TEST(Flops, Gpt2TrainingStepOfAFullContext) {
  // 1024 tokens from position 0 attend sum_{p=0}^{1023} (p + 1) = 1024 x 1025 / 2 = 524,800.
  // forward = 1024 x 2 x 123,532,032 + 4 x 12 x 12 x 64 x 524,800
  //         = 252,993,601,536 + 19,346,227,200 = 272,339,828,736; training = 3 x that.
  EXPECT_EQ(attended_positions(0, 1024), 524'800);
  EXPECT_DOUBLE_EQ(training_flops(gpt2_124m(), 1024), 817'019'486'208.0);
  // Per token that is 6 x 123,532,032 + 6 x 12 x 768 x 1025 = 797,870,592: llm.c's 6 N + 6 L C T
  // with the matmul parameters for N and the causal average (T + 1) / 2 for the attention.
  EXPECT_DOUBLE_EQ(training_flops(gpt2_124m(), 1024) / 1024, 6.0 * 123'532'032 + 6.0 * 12 * 768 * 1025);
}

TEST(Flops, PrefillCountsTheLmHeadOnlyForTheLogitsRows) {
  // 4 tokens from 0, logits of the last only: the lm_head (50257 x 768) runs once instead of 4 times.
  const ModelConfig c = gpt2_124m();
  EXPECT_DOUBLE_EQ(forward_flops(c, 0, 4, 4) - forward_flops(c, 0, 4, 1), 3 * 2.0 * 50257 * 768);
}

TEST(Flops, SmallLlamaWithGqa) {
  const ModelConfig c = small_gqa_llama();
  ASSERT_EQ(c.head_dim, 32);
  // Per layer: q 256 x 256 = 65,536; k, v 256 x (2 x 32) = 16,384 each; o 65,536;
  // SwiGLU 3 x 256 x 512 = 393,216; sum 557,056; x 2 = 1,114,112; lm_head 1000 x 256 = 256,000.
  EXPECT_EQ(matmul_parameters(c), 1'370'112);
  // Embedding 256,000 + lm_head 256,000 + 2 x (557,056 + 2 RMSNorm x 256) + final norm 256.
  EXPECT_EQ(parameter_count(c), 1'627'392);
  // A decode step at position 99 attends 100 positions:
  // 2 x 1,370,112 + 4 x 2 layers x 8 heads x 32 x 100 = 2,740,224 + 204,800.
  EXPECT_DOUBLE_EQ(forward_flops(c, 99, 1, 1), 2'945'024.0);
}

TEST(Flops, ParameterCountMatchesTheLoadedFixtures) {
  // Biases (GPT-2, Qwen2's q/k/v), learned positions, tied and untied heads, GQA, experts and
  // routers, as loaded.
  for (const char* name : {"gpt2", "llama", "mistral", "qwen2", "qwen3", "phi3", "olmo2", "mixtral",
                           "qwen3_moe", "gemma2", "gemma3"}) {
    const auto model = Model::load(std::string(TOKENMILL_FIXTURES_DIR) + "/hf/" + name);
    EXPECT_EQ(parameter_count(model->config), model->parameter_count()) << name;
  }
}

// A token runs k of a layer's experts: its matmuls read the router and those k experts only.
TEST(Flops, MixtureOfExpertsCountsTheExpertsATokenRuns) {
  const auto model = Model::load(std::string(TOKENMILL_FIXTURES_DIR) + "/hf/qwen3_moe");
  const ModelConfig& c = model->config;
  // q 64x128 + k, v 64x64 each + o 128x64 = 24,576; router 8 x 64 = 512; 3 experts of
  // 3 x 64 x 32 = 6,144 each: 43,520 per layer, 2 layers, lm_head 256 x 64 = 16,384.
  EXPECT_EQ(matmul_parameters(c), 2 * 43'520 + 16'384);
  // All 8 experts are parameters: 2 x (24,576 + 512 + 8 x 6,144 + norms 2 x 64 + q/k norms 2 x 32)
  // + embedding and lm_head 2 x 16,384 + final norm 64.
  EXPECT_EQ(parameter_count(c), 2 * (24'576 + 512 + 8 * 6'144 + 128 + 64) + 2 * 16'384 + 64);
}

TEST(Flops, MfuIsAchievedOverPeak) {
  EXPECT_DOUBLE_EQ(mfu(3.7e11, 1.0e12), 0.37);
  testing::expect_error([] { mfu(1e9, 0); }, {"MFU", "peak"});
}

}  // namespace
}  // namespace tokenmill
