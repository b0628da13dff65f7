// config.json parsing: every supported architecture's fields, and a clear error for each
// defect (the message names the file and the field).
#include <cmath>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/model_config.h"
#include "model/rope.h"

namespace tokenmill {
namespace {

using ::testing::HasSubstr;

nlohmann::json llama_config() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"vocab_size", 256},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"max_position_embeddings", 128},
          {"rms_norm_eps", 1e-5},
          {"eos_token_id", 2}};
}

std::string error_of(const nlohmann::json& config) {
  try {
    parse_model_config(config, "cfg.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(ModelConfig, ParsesLlamaWithDefaults) {
  const ModelConfig c = parse_model_config(llama_config(), "cfg.json");
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.norm, NormKind::RmsNorm);
  EXPECT_EQ(c.mlp, MlpKind::SwiGlu);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{2});
  EXPECT_EQ(c.kv_floats_per_token(), 2 * 2 * 2 * 16);
}

TEST(ModelConfig, ParsesGpt2Names) {
  const nlohmann::json j = {{"architectures", {"GPT2LMHeadModel"}},
                            {"vocab_size", 50257},
                            {"n_embd", 768},
                            {"n_layer", 12},
                            {"n_head", 12},
                            {"n_positions", 1024}};
  const ModelConfig c = parse_model_config(j, "cfg.json");
  EXPECT_EQ(c.intermediate_size, 4 * 768);
  EXPECT_EQ(c.norm, NormKind::LayerNorm);
  EXPECT_EQ(c.mlp, MlpKind::GeluTanh);
  EXPECT_EQ(c.positions, PositionKind::Learned);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.attention_qkv_bias);
}

TEST(ModelConfig, Qwen2HasQkvBiasButNoOutputBias) {
  auto j = llama_config();
  j["architectures"] = {"Qwen2ForCausalLM"};
  const ModelConfig c = parse_model_config(j, "cfg.json");
  EXPECT_TRUE(c.attention_qkv_bias);
  EXPECT_FALSE(c.attention_out_bias);
}

TEST(ModelConfig, MistralSlidesEveryLayerOverItsWindowWithoutCappingTheContext) {
  auto j = llama_config();
  j["architectures"] = {"MistralForCausalLM"};
  j["sliding_window"] = 32;
  const ModelConfig windowed = parse_model_config(j, "cfg.json");
  EXPECT_EQ(windowed.context_length(), 128);
  EXPECT_EQ(windowed.attention_scores(0).window, 32);
  EXPECT_EQ(windowed.attention_scores(1).window, 32);
  j["sliding_window"] = nullptr;
  EXPECT_EQ(parse_model_config(j, "cfg.json").attention_scores(0).window, 0);
}

TEST(ModelConfig, Qwen3HasQueryAndKeyNormsAndPhi3ASlidingWindow) {
  auto j = llama_config();
  j["architectures"] = {"Qwen3ForCausalLM"};
  j["head_dim"] = 32;
  const ModelConfig qwen3 = parse_model_config(j, "cfg.json");
  EXPECT_EQ(qwen3.qk_norm, QkNorm::PerHead);
  EXPECT_EQ(qwen3.q_norm_width(), 32);
  EXPECT_EQ(qwen3.head_dim, 32);
  EXPECT_FALSE(qwen3.attention_qkv_bias);
  j.erase("head_dim");
  j["architectures"] = {"Phi3ForCausalLM"};
  j["sliding_window"] = 48;
  const ModelConfig phi3 = parse_model_config(j, "cfg.json");
  EXPECT_EQ(phi3.qk_norm, QkNorm::None);
  EXPECT_EQ(phi3.context_length(), 128);
  EXPECT_EQ(phi3.attention_scores(1).window, 48);
}

// Gemma 3 as the Hub's configs have it (transformers 4.x: rope_theta, rope_local_base_freq,
// rope_scaling, sliding_window_pattern) and as transformers 5 writes it (rope_parameters per
// layer type, layer_types): the same model.
TEST(ModelConfig, Gemma3ReadsItsSlidingLayersAndTheirRopeInBothLayouts) {
  auto legacy = llama_config();
  legacy.erase("num_key_value_heads");
  legacy["architectures"] = {"Gemma3ForCausalLM"};
  legacy["num_hidden_layers"] = 8;
  legacy["num_key_value_heads"] = 1;
  legacy["head_dim"] = 16;
  legacy["hidden_activation"] = "gelu_pytorch_tanh";
  legacy["query_pre_attn_scalar"] = 32;
  legacy["sliding_window"] = 512;
  legacy["sliding_window_pattern"] = 6;
  legacy["rope_theta"] = 1000000.0;
  legacy["rope_local_base_freq"] = 10000.0;
  legacy["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  legacy["final_logit_softcapping"] = nullptr;
  const ModelConfig a = parse_model_config(legacy, "cfg.json");
  EXPECT_EQ(a.mlp, MlpKind::GeGlu);
  EXPECT_TRUE(a.sandwich_norms && a.norm_weight_offset && a.scale_embeddings && a.tie_word_embeddings);
  EXPECT_EQ(a.rope_theta, 1e6);
  EXPECT_EQ(a.rope_scaling.rope_type, "linear");
  EXPECT_EQ(a.sliding_rope_theta, 1e4);
  EXPECT_EQ(a.context_length(), 128);  // global layers: no cap at the window
  for (int64_t l = 0; l < 8; ++l) EXPECT_EQ(a.sliding_layer(l), l != 5) << l;
  EXPECT_EQ(a.attention_scores(0).window, 512);
  EXPECT_EQ(a.attention_scores(5).window, 0);
  EXPECT_FLOAT_EQ(a.attention_scores(5).scale, 1.0f / std::sqrt(32.0f));

  auto modern = legacy;
  for (const char* key : {"rope_theta", "rope_local_base_freq", "rope_scaling", "sliding_window_pattern"})
    modern.erase(key);
  modern["rope_parameters"] = {
      {"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1000000.0}}},
      {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}};
  modern["layer_types"] = nlohmann::json::array();
  for (int l = 0; l < 8; ++l)
    modern["layer_types"].push_back(l == 5 ? "full_attention" : "sliding_attention");
  const ModelConfig b = parse_model_config(modern, "cfg.json");
  EXPECT_EQ(b.rope_theta, a.rope_theta);
  EXPECT_EQ(b.rope_scaling.factor, a.rope_scaling.factor);
  EXPECT_EQ(b.sliding_rope_theta, a.sliding_rope_theta);
  EXPECT_EQ(b.sliding_layers, a.sliding_layers);

  auto bad = modern;
  bad["layer_types"].erase(0);
  EXPECT_THAT(error_of(bad), HasSubstr("layer_types must list one type for each of the 8 layers"));
  bad = modern;
  bad["layer_types"][2] = "chunked_attention";
  EXPECT_THAT(error_of(bad), HasSubstr("layer_types[2]"));
  bad = modern;
  bad["rope_parameters"]["sliding_attention"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  EXPECT_THAT(error_of(bad), HasSubstr("not supported for the sliding layers"));
  bad = modern;
  bad["hidden_activation"] = "silu";
  EXPECT_THAT(error_of(bad), HasSubstr("hidden_activation 'silu'"));
}

// Gemma 3 4B as the Hub ships it: Gemma3ForConditionalGeneration, whose text_config lists only
// what differs from Gemma3TextConfig's defaults (not even the head counts); a file without a
// text_config is refused by name.
TEST(ModelConfig, AMultimodalGemma3ReadsItsTextConfigOverTransformersDefaults) {
  nlohmann::json j = {{"architectures", {"Gemma3ForConditionalGeneration"}},
                      {"model_type", "gemma3"},
                      {"text_config",
                       {{"hidden_size", 2560},
                        {"intermediate_size", 10240},
                        {"model_type", "gemma3_text"},
                        {"num_hidden_layers", 34},
                        {"rope_scaling", {{"factor", 8.0}, {"rope_type", "linear"}}},
                        {"sliding_window", 1024}}},
                      {"vision_config", {{"hidden_size", 1152}}}};
  const ModelConfig c = parse_model_config(j, "cfg.json");
  EXPECT_EQ(c.architecture, "Gemma3ForConditionalGeneration");
  EXPECT_EQ(c.vocab_size, 262208);
  EXPECT_EQ(c.num_attention_heads, 8);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_scaling.rope_type, "linear");
  EXPECT_EQ(c.sliding_rope_theta, 1e4);
  for (int64_t l = 0; l < 12; ++l) EXPECT_EQ(c.sliding_layer(l), l % 6 != 5) << l;
  EXPECT_EQ(c.attention_scores(0).window, 1024);
  EXPECT_FLOAT_EQ(c.attention_scores(0).scale, 1.0f / 16.0f);  // query_pre_attn_scalar 256
  EXPECT_TRUE(c.tie_word_embeddings && c.sandwich_norms && c.qk_norm == QkNorm::PerHead);
  j.erase("text_config");
  try {
    parse_model_config(j, "cfg.json");
    ADD_FAILURE() << "a multimodal config without text_config was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("text_config"));
  }
}

// Gemma 2: every other layer slides (the first does), both soft caps, one RoPE base.
TEST(ModelConfig, Gemma2AlternatesSlidingLayersAndSoftCapsScoresAndLogits) {
  auto j = llama_config();
  j["architectures"] = {"Gemma2ForCausalLM"};
  j["num_hidden_layers"] = 4;
  j["head_dim"] = 16;
  j["sliding_window"] = 4096;
  j["attn_logit_softcapping"] = 50.0;
  j["final_logit_softcapping"] = 30.0;
  j["query_pre_attn_scalar"] = 16;
  const ModelConfig c = parse_model_config(j, "cfg.json");
  EXPECT_EQ(c.mlp, MlpKind::GeGlu);
  EXPECT_EQ(c.qk_norm, QkNorm::None);
  EXPECT_EQ(c.sliding_rope_theta, 0.0);
  EXPECT_EQ(c.sliding_layers, (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(c.attention_scores(0).window, 4096);
  EXPECT_EQ(c.attention_scores(1).window, 0);
  EXPECT_EQ(c.attention_scores(1).softcap, 50.0f);
  EXPECT_EQ(c.final_logit_softcapping, 30.0);
  j["attn_logit_softcapping"] = -1.0;
  EXPECT_THAT(error_of(j), HasSubstr("attn_logit_softcapping"));
}

TEST(ModelConfig, ReadsRopeScalingOldAndNewLayouts) {
  auto j = llama_config();
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  EXPECT_EQ(parse_model_config(j, "cfg.json").rope_scaling.rope_type, "linear");
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "llama3"},  {"factor", 8.0},
                          {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                          {"rope_theta", 500000.0}, {"original_max_position_embeddings", 8192}};
  const ModelConfig c = parse_model_config(j, "cfg.json");
  EXPECT_EQ(c.rope_scaling.rope_type, "llama3");
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
}

TEST(ModelConfig, GenerationConfigOverridesEosAndSampling) {
  ModelConfig c = parse_model_config(llama_config(), "cfg.json");
  apply_generation_config(
      {{"eos_token_id", {2, 3}}, {"do_sample", true}, {"temperature", 0.6}, {"top_p", 0.9}}, "gen.json", c);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{2, 3}));
  EXPECT_TRUE(*c.generation.do_sample);
  EXPECT_DOUBLE_EQ(*c.generation.temperature, 0.6);
  EXPECT_THROW(apply_generation_config({{"top_p", 2.0}}, "gen.json", c), Error);
}

TEST(ModelConfig, RejectsEachDefectWithItsFieldName) {
  auto j = llama_config();
  j["architectures"] = {"BertModel"};
  EXPECT_THAT(error_of(j), HasSubstr("unsupported architecture 'BertModel'"));

  j = llama_config();
  j.erase("architectures");
  EXPECT_THAT(error_of(j), HasSubstr("architectures"));

  j = llama_config();
  j.erase("hidden_size");
  EXPECT_THAT(error_of(j), HasSubstr("missing required field 'hidden_size'"));

  j = llama_config();
  j["num_attention_heads"] = 5;
  EXPECT_THAT(error_of(j), HasSubstr("not divisible by the 5 attention heads"));

  j = llama_config();
  j["num_key_value_heads"] = 3;
  EXPECT_THAT(error_of(j), HasSubstr("not divisible by 3 key/value heads"));

  j = llama_config();
  j["num_hidden_layers"] = 100000;
  EXPECT_THAT(error_of(j), HasSubstr("num_hidden_layers"));

  j = llama_config();
  j["vocab_size"] = -1;
  EXPECT_THAT(error_of(j), HasSubstr("vocab_size"));

  j = llama_config();
  j["hidden_size"] = "64";
  EXPECT_THAT(error_of(j), HasSubstr("'hidden_size' must be an integer"));

  j = llama_config();
  j["hidden_size"] = 18446744073709551615u;
  EXPECT_THAT(error_of(j), HasSubstr("hidden_size"));

  j = llama_config();
  j["hidden_act"] = "relu";
  EXPECT_THAT(error_of(j), HasSubstr("unsupported activation 'relu'"));

  j = llama_config();
  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 4.0}};
  EXPECT_THAT(error_of(j), HasSubstr("rope type 'dynamic' is not supported"));

  j = llama_config();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_THAT(error_of(j),
              HasSubstr("rope_scaling: missing required field 'original_max_position_embeddings'"));

  // LongRoPE: one factor per rotated pair (head_dim 16: 8 pairs), two lists of numbers > 0.
  j = llama_config();
  j["architectures"] = {"Phi3ForCausalLM"};
  j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", {1.0}}, {"long_factor", {2.0}}};
  EXPECT_THAT(error_of(j), HasSubstr("LongRoPE has 1 factors per list but the 16 rotated elements"));
  j["rope_scaling"] = {{"type", "su"}, {"short_factor", std::vector<double>(8, 1.0)}};
  EXPECT_THAT(error_of(j), HasSubstr("missing required field 'long_factor'"));
  j["rope_scaling"]["long_factor"] = std::vector<double>(7, 1.0);
  EXPECT_THAT(error_of(j), HasSubstr("short_factor has 8 values and long_factor 7"));
  j["rope_scaling"]["long_factor"] = std::vector<double>(8, 0.0);
  EXPECT_THAT(error_of(j), HasSubstr("'long_factor' must hold finite numbers > 0"));

  // Rotating part of each head: an even count of at least 2 (int(16 * 0.1) = 1 is not).
  j = llama_config();
  j["partial_rotary_factor"] = 0.1;
  EXPECT_THAT(error_of(j), HasSubstr("RoPE rotates 1 elements of each head of 16"));
  j = llama_config();
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e4}, {"partial_rotary_factor", 1.5}};
  EXPECT_THAT(error_of(j), HasSubstr("'partial_rotary_factor' = 1.5 is outside"));

  j = llama_config();
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  EXPECT_THAT(error_of(j), HasSubstr("original_max_position_embeddings"));

  EXPECT_THAT(error_of(nlohmann::json::array()), HasSubstr("expected a JSON object"));
}

TEST(ModelConfig, PartialRotaryFactorAtEitherLevel) {
  nlohmann::json j = llama_config();
  EXPECT_EQ(parse_model_config(j, "cfg.json").rotary_dim, 16);
  j["partial_rotary_factor"] = 0.75;  // Phi-4-mini's transformers 4 layout
  EXPECT_EQ(parse_model_config(j, "cfg.json").rotary_dim, 12);
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e4}, {"partial_rotary_factor", 0.5}};
  EXPECT_EQ(parse_model_config(j, "cfg.json").rotary_dim, 8);  // transformers 5: rope_parameters wins
}

// Phi-3.5-mini's layout, shrunk: 4 pairs, original context 32 of 128 (factor 4).
nlohmann::json longrope_config() {
  nlohmann::json j = llama_config();
  j["architectures"] = {"Phi3ForCausalLM"};
  j["hidden_size"] = 32;
  j["original_max_position_embeddings"] = 32;
  j["rope_scaling"] = {
      {"type", "longrope"}, {"short_factor", {1.0, 1.25, 1.5, 2.0}}, {"long_factor", {1.0, 4.0, 16.0, 40.0}}};
  return j;
}

TEST(ModelConfig, LongRopeReadsPhi3Fields) {
  ModelConfig c = parse_model_config(longrope_config(), "cfg.json");
  const RopeScaling& s = c.rope_scaling;
  EXPECT_EQ(s.rope_type, "longrope");  // "su" and "longrope" alike
  EXPECT_EQ(s.original_max_position_embeddings, 32);
  EXPECT_DOUBLE_EQ(s.factor, 4.0);  // max_position_embeddings / original
  EXPECT_DOUBLE_EQ(s.attention_factor, std::sqrt(1.0 + std::log(4.0) / std::log(32.0)));
  EXPECT_FLOAT_EQ(c.rope_magnitude(0), static_cast<float>(s.attention_factor));

  nlohmann::json j = longrope_config();
  j["rope_scaling"]["attention_factor"] = 1.5;  // given: taken as is
  j.erase("original_max_position_embeddings");
  j["rope_scaling"]["original_max_position_embeddings"] = 64;  // transformers 5's place
  c = parse_model_config(j, "cfg.json");
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 64);
  EXPECT_DOUBLE_EQ(c.rope_scaling.attention_factor, 1.5);
}

TEST(Rope, LongRopeDividesByTheFactorsOfTheRunsContext) {
  const ModelConfig c = parse_model_config(longrope_config(), "cfg.json");
  const auto plain = rope_inverse_frequencies(RopeScaling{}, 10000.0, 8, 0);
  const auto within = rope_inverse_frequencies(c.rope_scaling, 10000.0, 8, 32);
  const auto beyond = rope_inverse_frequencies(c.rope_scaling, 10000.0, 8, 33);
  for (size_t j = 0; j < plain.size(); ++j) {
    EXPECT_FLOAT_EQ(within[j], plain[j] / c.rope_scaling.short_factor[j]);
    EXPECT_FLOAT_EQ(beyond[j], plain[j] / c.rope_scaling.long_factor[j]);
  }
}

TEST(Rope, DefaultFrequenciesFollowTheta) {
  const auto f = rope_inverse_frequencies(RopeScaling{}, 10000.0, 8, 0);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_NEAR(f[1], std::pow(10000.0, -0.25), 1e-7);
  EXPECT_NEAR(f[3], std::pow(10000.0, -0.75), 1e-9);
}

TEST(Rope, LinearDividesAndLlama3KeepsHighFrequencies) {
  RopeScaling linear;
  linear.rope_type = "linear";
  linear.factor = 4.0;
  const auto base = rope_inverse_frequencies(RopeScaling{}, 500000.0, 64, 0);
  const auto lin = rope_inverse_frequencies(linear, 500000.0, 64, 0);
  for (size_t i = 0; i < base.size(); ++i) EXPECT_FLOAT_EQ(lin[i], base[i] / 4.0f);

  RopeScaling llama3;
  llama3.rope_type = "llama3";
  llama3.factor = 8.0;
  llama3.original_max_position_embeddings = 8192;
  const auto l3 = rope_inverse_frequencies(llama3, 500000.0, 64, 0);
  EXPECT_FLOAT_EQ(l3.front(), base.front());                           // short wavelength: unchanged
  EXPECT_FLOAT_EQ(l3.back(), base.back() / 8.0f);                      // long wavelength: divided by factor
  for (size_t i = 1; i < l3.size(); ++i) EXPECT_LE(l3[i], l3[i - 1]);  // still monotone
}

}  // namespace
}  // namespace tokenmill
