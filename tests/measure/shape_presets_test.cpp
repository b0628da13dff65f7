// The --shape presets against the figures of the config.json each names as its source, and
// their parameter counts against the published ones (within 1 %) and against hand sums.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "measure/bench_model.h"
#include "measure/flops.h"
#include "model/shape_presets.h"
#include "support/expect_error.h"

namespace tokenmill {
namespace {

// The figures of each source config.json, written out again here so that a slip in the
// presets' JSON shows up. (name, architecture, hidden, layers, heads, kv heads, head_dim,
// intermediate, vocab, tied)
struct Published {
  const char* name;
  const char* architecture;
  int64_t hidden, layers, heads, kv_heads, head_dim, intermediate, vocab;
  bool tied;
};

constexpr Published kPublished[] = {
    {"gpt2-124m", "GPT2LMHeadModel", 768, 12, 12, 12, 64, 3072, 50257, true},
    {"smollm2-135m", "LlamaForCausalLM", 576, 30, 9, 3, 64, 1536, 49152, true},
    {"qwen2.5-0.5b", "Qwen2ForCausalLM", 896, 24, 14, 2, 64, 4864, 151936, true},
    {"llama-3.2-1b", "LlamaForCausalLM", 2048, 16, 32, 8, 64, 8192, 128256, true},
    {"mistral-7b", "MistralForCausalLM", 4096, 32, 32, 8, 128, 14336, 32000, false},
    {"llama-3-8b", "LlamaForCausalLM", 4096, 32, 32, 8, 128, 14336, 128256, false},
};

TEST(ShapePresets, MatchTheirSources) {
  ASSERT_EQ(shape_presets().size(), std::size(kPublished));
  for (const Published& p : kPublished) {
    SCOPED_TRACE(p.name);
    const ShapePreset& preset = shape_preset(p.name);
    const ModelConfig& c = preset.config;
    EXPECT_EQ(c.architecture, p.architecture);
    EXPECT_EQ(c.hidden_size, p.hidden);
    EXPECT_EQ(c.num_hidden_layers, p.layers);
    EXPECT_EQ(c.num_attention_heads, p.heads);
    EXPECT_EQ(c.num_key_value_heads, p.kv_heads);
    EXPECT_EQ(c.head_dim, p.head_dim);
    EXPECT_EQ(c.intermediate_size, p.intermediate);
    EXPECT_EQ(c.vocab_size, p.vocab);
    EXPECT_EQ(c.tie_word_embeddings, p.tied);
    EXPECT_NE(preset.config_source.find("huggingface.co/"), std::string::npos);
    EXPECT_FALSE(preset.parameters_source.empty());
    const double counted = static_cast<double>(parameter_count(c));
    EXPECT_LT(std::fabs(counted / static_cast<double>(preset.published_parameters) - 1.0), 0.01)
        << counted << " vs " << preset.published_parameters;
  }
}

TEST(ShapePresets, ArchitectureDetails) {
  EXPECT_EQ(shape_preset("qwen2.5-0.5b").config.attention_qkv_bias, true);
  EXPECT_EQ(shape_preset("mistral-7b").config.sliding_window, 4096);
  EXPECT_EQ(shape_preset("llama-3.2-1b").config.rope_scaling.rope_type, "llama3");
  EXPECT_DOUBLE_EQ(shape_preset("llama-3.2-1b").config.rope_scaling.factor, 32.0);
  EXPECT_DOUBLE_EQ(shape_preset("llama-3-8b").config.rope_theta, 500000.0);
  EXPECT_EQ(shape_preset("gpt2-124m").config.positions, PositionKind::Learned);
}

TEST(ShapePresets, ParameterCountsByHand) {
  // SmolLM2-135M: embedding 49152 x 576 = 28,311,552 (tied); per layer q, o 2 x 576^2 = 663,552,
  //   k, v 2 x 576 x 192 = 221,184, MLP 3 x 576 x 1536 = 2,654,208, norms 1,152: 3,540,096;
  //   x 30 = 106,202,880; final norm 576: 134,515,008.
  EXPECT_EQ(parameter_count(shape_preset("smollm2-135m").config), 134'515'008);
  // Qwen2.5-0.5B: embedding 151936 x 896 = 136,134,656 (tied); per layer q 896^2 + 896 =
  //   803,712, k, v 2 x (896 x 128 + 128) = 229,632, o 802,816, MLP 3 x 896 x 4864 = 13,074,432,
  //   norms 1,792: 14,912,384; x 24 = 357,897,216; final norm 896: 494,032,768.
  EXPECT_EQ(parameter_count(shape_preset("qwen2.5-0.5b").config), 494'032'768);
  // Llama-3-8B: embedding and lm_head 2 x 128256 x 4096 = 1,050,673,152; per layer q, o
  //   2 x 4096^2 = 33,554,432, k, v 2 x 4096 x 1024 = 8,388,608, MLP 3 x 4096 x 14336 =
  //   176,160,768, norms 8,192: 218,112,000; x 32 = 6,979,584,000; final norm 4,096:
  //   8,030,261,248.
  EXPECT_EQ(parameter_count(shape_preset("llama-3-8b").config), 8'030'261'248);
}

TEST(ShapePresets, UnknownNameListsTheKnownOnes) {
  testing::expect_error([] { shape_preset("llama-9000"); },
                        {"unknown --shape 'llama-9000'", "gpt2-124m", "llama-3-8b", "--shape list"});
}

TEST(ShapePresets, ListNamesEveryPresetAndItsSource) {
  const std::string list = shape_list();
  for (const ShapePreset& p : shape_presets()) {
    EXPECT_NE(list.find(p.name), std::string::npos) << p.name;
    EXPECT_NE(list.find(p.config_source), std::string::npos) << p.name;
  }
}

TEST(ShapePresets, SyntheticModelBytesAndRefusal) {
  const ModelConfig& c = shape_preset("smollm2-135m").config;
  // f32: values, gradients and two moments, 16 bytes per parameter; bf16 adds 2 per parameter.
  EXPECT_EQ(synthetic_model_bytes(c, DType::F32), 16ull * 134'515'008);
  EXPECT_EQ(synthetic_model_bytes(c, DType::BF16), 18ull * 134'515'008);
  MemoryBudget budget(uint64_t{1} << 30);
  testing::expect_error(
      [&] { synthetic_bench_model(shape_preset("smollm2-135m"), DType::F32, 1, budget); },
      {"smollm2-135m", "need 2.00 GiB", "only 1.00 GiB", "smaller --shape", "--max-memory-gib"});
  EXPECT_EQ(budget.left(), uint64_t{1} << 30);  // nothing taken
}

}  // namespace
}  // namespace tokenmill
