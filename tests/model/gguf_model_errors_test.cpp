// GGUF model loading refuses what it cannot run, with a message naming the file and the
// key or tensor: unsupported architectures, missing hyper-parameters, missing tensors,
// shapes that disagree with the hyper-parameters, tensor types tokenmill does not run,
// rotary dimensions and LongRoPE factors that do not fit the heads, unsupported rope scaling.
// A well-formed tiny file loads.
#include <cstring>
#include <functional>
#include <string>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "gguf/gguf_builder.h"
#include "model/gguf_model.h"
#include "support/expect_error.h"

namespace tokenmill {
namespace {

using testing::expect_error;
using testing::GgufBuilder;

constexpr uint32_t kF32 = 0, kQ4_1 = 3, kIQ2_XXS = 16;
constexpr int64_t kHidden = 32, kFf = 64, kVocab = 16;

// A mixture of experts: llama.expert_count and the experts stacked in the tensors (which a
// broken file may make disagree), and the experts each token runs.
struct Experts {
  int64_t in_metadata = 0, in_tensors = 0, per_token = 0;
  bool one_tensor_per_expert = false;  // llama.cpp's files before April 2024: blk.N.ffn_gate.E.weight
};

// A one-layer llama with hidden 32, 2 heads, MLP 64, vocab 16 (with `experts`, a Mixtral whose
// experts are that MLP); `edit` changes the builder before the tensors are added; `skip`
// omits one tensor; `q_type` is attn_q's ggml type.
std::string tiny_llama(const std::function<void(GgufBuilder&)>& edit = {}, const std::string& skip = "",
                       uint32_t q_type = kF32, Experts experts = {}) {
  GgufBuilder b;
  b.kv_string("general.architecture", "llama")
      .kv("llama.embedding_length", GgufType::U32, static_cast<uint32_t>(kHidden))
      .kv("llama.feed_forward_length", GgufType::U32, static_cast<uint32_t>(kFf))
      .kv("llama.block_count", GgufType::U32, uint32_t{1})
      .kv("llama.attention.head_count", GgufType::U32, uint32_t{2})
      .kv("llama.context_length", GgufType::U32, uint32_t{64})
      .kv("llama.attention.layer_norm_rms_epsilon", GgufType::F32, 1e-5f);
  if (experts.in_metadata > 0)
    b.kv("llama.expert_count", GgufType::U32, static_cast<uint32_t>(experts.in_metadata))
        .kv("llama.expert_used_count", GgufType::U32, static_cast<uint32_t>(experts.per_token));
  if (edit) edit(b);
  const auto add = [&](const std::string& name, std::vector<int64_t> shape, uint32_t type = kF32) {
    if (name == skip) return;
    uint64_t n = 1;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    b.tensor(name, shape, type, type == kQ4_1 ? n / 32 * 20 : n * 4);
  };
  add("token_embd.weight", {kHidden, kVocab});
  add("blk.0.attn_norm.weight", {kHidden});
  add("blk.0.attn_q.weight", {kHidden, kHidden}, q_type);
  add("blk.0.attn_k.weight", {kHidden, kHidden});
  add("blk.0.attn_v.weight", {kHidden, kHidden});
  add("blk.0.attn_output.weight", {kHidden, kHidden});
  add("blk.0.ffn_norm.weight", {kHidden});
  if (experts.in_tensors > 0 && experts.one_tensor_per_expert) {
    add("blk.0.ffn_gate_inp.weight", {kHidden, experts.in_tensors});
    for (int64_t e = 0; e < experts.in_tensors; ++e)
      for (const char* m : {"gate", "up", "down"})
        add(fmt::format("blk.0.ffn_{}.{}.weight", m, e), std::string(m) == "down"
                                                             ? std::vector<int64_t>{kFf, kHidden}
                                                             : std::vector<int64_t>{kHidden, kFf});
  } else if (experts.in_tensors > 0) {
    add("blk.0.ffn_gate_inp.weight", {kHidden, experts.in_tensors});
    add("blk.0.ffn_gate_exps.weight", {kHidden, kFf, experts.in_tensors});
    add("blk.0.ffn_up_exps.weight", {kHidden, kFf, experts.in_tensors});
    add("blk.0.ffn_down_exps.weight", {kFf, kHidden, experts.in_tensors});
  } else {
    add("blk.0.ffn_gate.weight", {kHidden, kFf});
    add("blk.0.ffn_up.weight", {kHidden, kFf});
    add("blk.0.ffn_down.weight", {kFf, kHidden});
  }
  add("output_norm.weight", {kHidden});
  return b.build();
}

void load(const std::string& bytes) {
  const GgufFile gguf = GgufFile::parse(testing::as_bytes(bytes), "tiny.gguf");
  const ModelConfig config = gguf_model_config(gguf);
  ModelWeights weights;
  load_gguf_weights(config, gguf, weights);
}

TEST(GgufModel, TinyLlamaLoads) {
  const std::string bytes = tiny_llama();
  const GgufFile gguf = GgufFile::parse(testing::as_bytes(bytes), "tiny.gguf");
  const ModelConfig c = gguf_model_config(gguf);
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.vocab_size, kVocab);  // from token_embd's rows: no llama.vocab_size key
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_layout, RopeLayout::Interleaved);
  ModelWeights w;
  load_gguf_weights(c, gguf, w);
  EXPECT_EQ(w.lm_head.data, w.token_embedding.data);
  EXPECT_EQ(w.layers.size(), 1u);
}

TEST(GgufModel, QuantizedMatricesStayInTheFile) {
  const std::string bytes = tiny_llama({}, "", kQ4_1);
  const GgufFile gguf = GgufFile::parse(testing::as_bytes(bytes), "tiny.gguf");
  ModelWeights w;
  load_gguf_weights(gguf_model_config(gguf), gguf, w);
  EXPECT_EQ(w.layers[0].q.dtype, DType::Q4_1);
  EXPECT_EQ(w.layers[0].q.data, gguf.tensor_data(*gguf.find_tensor("blk.0.attn_q.weight")).data());
}

TEST(GgufModel, LlamaFileWithExpertsIsAMixtral) {
  const std::string bytes = tiny_llama({}, "", kF32, {.in_metadata = 4, .in_tensors = 4, .per_token = 2});
  const GgufFile gguf = GgufFile::parse(testing::as_bytes(bytes), "tiny.gguf");
  const ModelConfig config = gguf_model_config(gguf);
  EXPECT_EQ(config.architecture, "MixtralForCausalLM");
  EXPECT_EQ(config.num_experts, 4);
  EXPECT_EQ(config.experts_per_token, 2);
  EXPECT_EQ(config.expert_intermediate_size, kFf);
  EXPECT_TRUE(config.normalize_expert_weights);
  ModelWeights weights;
  load_gguf_weights(config, gguf, weights);
  const LayerWeights& l = weights.layers[0];
  EXPECT_EQ(l.expert_gate.rows(), 4 * kFf);
  EXPECT_EQ(l.expert_gate.cols(), kHidden);
  EXPECT_EQ(l.expert_down.rows(), 4 * kHidden);
  EXPECT_EQ(l.expert_down.cols(), kFf);
  EXPECT_EQ(l.router.rows(), 4);
  EXPECT_EQ(l.gate.data, nullptr);
}

// The first Mixtral GGUFs keep a tensor per expert: stacked at load, expert e's rows after
// expert e - 1's, byte for byte.
TEST(GgufModel, OneTensorPerExpertIsStacked) {
  const std::string bytes = tiny_llama(
      {}, "", kF32, {.in_metadata = 3, .in_tensors = 3, .per_token = 2, .one_tensor_per_expert = true});
  const GgufFile gguf = GgufFile::parse(testing::as_bytes(bytes), "tiny.gguf");
  const ModelConfig config = gguf_model_config(gguf);
  ModelWeights weights;
  load_gguf_weights(config, gguf, weights);
  const LayerWeights& l = weights.layers[0];
  ASSERT_EQ(l.expert_down.rows(), 3 * kHidden);
  for (int64_t e = 0; e < 3; ++e) {
    const GgufTensorInfo& down = *gguf.find_tensor(fmt::format("blk.0.ffn_down.{}.weight", e));
    const Tensor stacked = expert_matrix(l.expert_down, e, 3);
    ASSERT_EQ(stacked.nbytes(), down.nbytes);
    EXPECT_EQ(std::memcmp(stacked.data, gguf.tensor_data(down).data(), down.nbytes), 0) << "expert " << e;
  }
  expect_error(
      [] {
        load(tiny_llama({}, "blk.0.ffn_up.2.weight", kF32,
                        {.in_metadata = 3, .in_tensors = 3, .per_token = 2, .one_tensor_per_expert = true}));
      },
      {"tensor 'blk.0.ffn_up.2.weight' is missing"});
}

TEST(GgufModel, InconsistentExpertCountsAreRefused) {
  expect_error(
      [] { load(tiny_llama({}, "", kF32, {.in_metadata = 4, .in_tensors = 3, .per_token = 2})); },
      {"'blk.0.ffn_gate_inp.weight' has ne = [32, 3] but the model's hyper-parameters need [32, 4]"});
  expect_error([] { load(tiny_llama({}, "", kF32, {.in_metadata = 2, .in_tensors = 2, .per_token = 3})); },
               {"field 'num_experts_per_tok' = 3 is outside [1, 2]"});
  expect_error(
      [] {
        load(tiny_llama({}, "blk.0.ffn_up_exps.weight", kF32, {4, 4, 2}));
      },
      {"tensor 'blk.0.ffn_up_exps.weight' is missing"});
  expect_error([] { load(tiny_llama({}, "", kF32, {.in_metadata = 0, .in_tensors = 4, .per_token = 0})); },
               {"tensor 'blk.0.ffn_gate.weight' is missing"});
}

TEST(GgufModel, UnsupportedArchitecture) {
  GgufBuilder b;
  b.kv_string("general.architecture", "mamba");
  expect_error([&] { load(b.build()); },
               {"tiny.gguf", "'mamba' is not supported", "gpt2, llama, qwen2, qwen3, qwen3moe, phi3, olmo2"});
}

TEST(GgufModel, MissingHyperParameter) {
  GgufBuilder b;
  b.kv_string("general.architecture", "llama");
  expect_error([&] { load(b.build()); }, {"tiny.gguf", "llama.embedding_length"});
}

TEST(GgufModel, MissingTensor) {
  expect_error([] { load(tiny_llama({}, "blk.0.ffn_up.weight")); },
               {"tiny.gguf", "'blk.0.ffn_up.weight' is missing"});
}

TEST(GgufModel, ShapeDisagreesWithHyperParameters) {
  const auto wider = [](GgufBuilder& b) { b.kv("llama.vocab_size", GgufType::U32, uint32_t{20}); };
  expect_error([&] { load(tiny_llama(wider)); },
               {"tiny.gguf", "token_embd.weight", "ne = [32, 16]", "[32, 20]"});
}

TEST(GgufModel, TensorTypeNotRun) {
  // IQ2_XXS blocks are 256 wide: a 256-column q matrix keeps the file itself valid.
  GgufBuilder b;
  b.kv_string("general.architecture", "llama")
      .kv("llama.embedding_length", GgufType::U32, uint32_t{256})
      .kv("llama.feed_forward_length", GgufType::U32, uint32_t{256})
      .kv("llama.block_count", GgufType::U32, uint32_t{1})
      .kv("llama.attention.head_count", GgufType::U32, uint32_t{2})
      .kv("llama.context_length", GgufType::U32, uint32_t{64})
      .kv("llama.attention.layer_norm_rms_epsilon", GgufType::F32, 1e-5f)
      .tensor("token_embd.weight", {256, 4}, kF32, 256 * 4 * 4)
      .tensor("blk.0.attn_norm.weight", {256}, kF32, 256 * 4)
      .tensor("blk.0.attn_q.weight", {256, 256}, kIQ2_XXS, 256 * 66);
  expect_error([&] { load(b.build()); },
               {"tiny.gguf", "blk.0.attn_q.weight", "IQ2_XXS", "tokenmill quantize"});
}

TEST(GgufModel, RotaryDimensionsAreValidated) {
  for (const uint32_t rotary : {0u, 7u, 18u}) {  // heads of 16
    const auto partial = [&](GgufBuilder& b) { b.kv("llama.rope.dimension_count", GgufType::U32, rotary); };
    expect_error([&] { load(tiny_llama(partial)); }, {"tiny.gguf", "llama.rope.dimension_count",
                                                      fmt::format("RoPE rotates {} elements", rotary)});
  }
}

TEST(GgufModel, LongRopeFactorsAreValidated) {
  // rope_factors_long without rope_factors_short, then with 3 values for 8 rotated pairs.
  const auto long_only = [](GgufBuilder& b) { b.tensor("rope_factors_long.weight", {8}, kF32, 8 * 4); };
  expect_error([&] { load(tiny_llama(long_only)); }, {"tiny.gguf", "'rope_factors_short.weight' is missing"});
  const auto short_list = [](GgufBuilder& b) {
    b.tensor("rope_factors_long.weight", {8}, kF32, 8 * 4)
        .tensor("rope_factors_short.weight", {3}, kF32, 3 * 4);
  };
  expect_error([&] { load(tiny_llama(short_list)); },
               {"tiny.gguf", "'rope_factors_short.weight' must be a float vector of 8 values"});
}

TEST(GgufModel, UnsupportedRopeScaling) {
  const auto longrope = [](GgufBuilder& b) { b.kv_string("llama.rope.scaling.type", "longrope"); };
  expect_error([&] { load(tiny_llama(longrope)); }, {"tiny.gguf", "'longrope'", "llama.rope.scaling.type"});
  const auto yarn = [](GgufBuilder& b) {
    b.kv_string("llama.rope.scaling.type", "yarn");
    b.kv("llama.rope.scaling.factor", GgufType::F32, 4.0f);
  };
  expect_error([&] { load(tiny_llama(yarn)); }, {"tiny.gguf", "llama.rope.scaling.original_context_length"});
}

TEST(GgufModel, HyperParametersAreValidated) {
  const auto zero_heads = [](GgufBuilder& b) {
    b.kv("llama.attention.head_count_kv", GgufType::U32, uint32_t{3});
  };
  expect_error([&] { load(tiny_llama(zero_heads)); }, {"tiny.gguf", "not divisible by 3 key/value heads"});
}

}  // namespace
}  // namespace tokenmill
