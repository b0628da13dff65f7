// Golden tests: our forward pass vs transformers on the tiny random models that
// tests/fixtures/make_hf_fixtures.py builds (GPT-2, Llama with GQA + llama3 rope scaling,
// Llama bf16 + linear scaling, sharded Mistral with MQA + tied embeddings, Qwen2 f16 with
// q/k/v biases). Tolerances:
//  - logits computed by transformers in float32 (also for bf16/f16 files: same rounded
//    weights, f32 math, which is our CPU policy): max |ours - theirs| <= 1e-4 * max |theirs|
//    with an f32 KV cache; with the default cache of bf16/f16 models (f16, which rounds K,
//    V, q and the probabilities: Model::default_kv_dtype) <= 3e-3 * max |theirs|;
//  - logits transformers computed in the file's own half precision ("logits_native"):
//    max |ours - theirs| <= 5e-2 * max |theirs| (bf16 keeps 8 bits of mantissa);
//  - greedy continuation of 32 tokens: identical ids.
// Each case runs on the CPU and, when one is usable, on the GPU (the CUDA backend, weights
// placed in device memory). There f32 weights keep f32 math (FP32 GEMMs) and the CPU's
// tolerance; bf16/f16 weights take tensor-core GEMMs whose activations are rounded to the
// weights' dtype, so their logits are held to 3e-2 (about 8 rounding steps of 2^-9 each
// through the layers of these tiny models), or to 1.5 x the distance of transformers' own
// half-precision run from its f32 one where that is larger (Gemma's four norms a layer and
// scaled embeddings carry the rounding further), and their greedy ids are not compared (a
// near-tie may flip under that rounding).
// gpt-oss's MXFP4 experts (gpt_oss_mxfp4) multiply as ggml multiplies quantized weights,
// with each activation row rounded to Q8_0 (Backend::matmul): their logits are held to 3e-2
// and their greedy ids to llama.cpp's, which rounds them so too (llama_cpp_greedy.json, from
// scripts/check_llama_cpp_gguf.py --record); the same model with its experts dequantized to
// f32 is held to the f32 tolerance (the checkpoint's weights, repacked bit for bit).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "core/json_file.h"
#include "model/transformer.h"
#include "quant/quant_reference.h"
#include "runtime/device_choice.h"
#include "runtime/generator.h"
#include "support/gpu_devices.h"

namespace tokenmill {
namespace {

const std::filesystem::path kFixtures = std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "hf";

struct Fixture {
  std::unique_ptr<Model> model;
  nlohmann::json expected;
};

Fixture load_fixture(const std::string& name) {
  Fixture f;
  f.model = Model::load(kFixtures / name);
  f.expected = read_json_file(kFixtures / name / "expected.json");
  return f;
}

// max |a - b| over every element of two logit row lists.
double max_difference(const nlohmann::json& a_rows, const nlohmann::json& b_rows) {
  double worst = 0.0;
  for (size_t r = 0; r < a_rows.size(); ++r)
    for (size_t i = 0; i < a_rows[r].size(); ++i)
      worst = std::max(worst, std::abs(a_rows[r][i].get<double>() - b_rows[r][i].get<double>()));
  return worst;
}

// max |a - b| over max |b|, with the absolute figure reported on failure; max |a - b| may also
// reach `abs_allowance`.
void expect_logits_close(const std::vector<float>& ours, const nlohmann::json& theirs_rows, double rel_tol,
                         const std::string& what, double abs_allowance = 0.0) {
  std::vector<float> theirs;
  for (const auto& row : theirs_rows)
    for (const auto& v : row) theirs.push_back(v.get<float>());
  ASSERT_EQ(ours.size(), theirs.size()) << what;
  double max_diff = 0.0, max_ref = 0.0;
  for (size_t i = 0; i < ours.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(ours[i]) - theirs[i]));
    max_ref = std::max(max_ref, std::abs(static_cast<double>(theirs[i])));
  }
  EXPECT_LE(max_diff, std::max(rel_tol * max_ref, abs_allowance))
      << what << ": max abs diff " << max_diff << " (max |logit| " << max_ref << ", relative "
      << max_diff / max_ref << ")";
  std::printf("  %s: max abs diff %.3g, relative %.3g\n", what.c_str(), max_diff, max_diff / max_ref);
}

// The logits at every position of `prompt` (token ids); the transformer is reset after.
std::vector<float> all_logits(Transformer& transformer, int64_t vocab, const nlohmann::json& prompt) {
  const auto ids = prompt.get<std::vector<int32_t>>();
  std::vector<float> logits(ids.size() * static_cast<size_t>(vocab));
  transformer.forward_all(ids, logits);
  transformer.reset();
  return logits;
}

using testing::DeviceCase;

std::vector<DeviceCase> parity_cases() {
  return testing::on_every_device({"gpt2", "llama", "llama_bf16", "mistral", "qwen2", "qwen3", "phi3",
                                   "phi4_mini", "olmo2", "mixtral", "qwen3_moe", "gemma2", "gemma3",
                                   "gemma3_bf16", "gemma3_vision", "gpt_oss", "gpt_oss_bf16", "gpt_oss_mxfp4",
                                   "smollm_chat"});
}

bool has_half_weights(const Model& model) {
  const DType t = model.weights.layers.front().q.dtype;
  return t == DType::BF16 || t == DType::F16;
}

bool has_quantized_experts(const Model& model) {
  const Tensor& experts = model.weights.layers.front().expert_gate;
  return experts.data != nullptr && is_quantized(experts.dtype);
}

class ModelParity : public ::testing::TestWithParam<DeviceCase> {
 protected:
  void SetUp() override {
    f_ = load_fixture(GetParam().fixture);
    half_weights_ = has_half_weights(*f_.model);
    quantized_experts_ = has_quantized_experts(*f_.model);
    backend_ = choose_device(GetParam().device, *f_.model).backend;
  }
  // Whether activations are rounded: half weights on the GPU, quantized experts anywhere.
  bool rounded_activations() const {
    return (GetParam().device == "cuda" && half_weights_) || quantized_experts_;
  }
  // The f32-math tolerance, or the one of rounded activations.
  double tolerance() const { return rounded_activations() ? 3e-2 : 1e-4; }
  // The KV caches every check runs with: f32, and the model's default when that differs.
  std::vector<DType> caches() const {
    std::vector<DType> result = {DType::F32};
    if (f_.model->default_kv_dtype() != DType::F32) result.push_back(f_.model->default_kv_dtype());
    return result;
  }
  // tolerance() with an f32 cache; a 16-bit cache rounds keys and values to f16 (3e-3).
  double tolerance(DType cache) const {
    return cache == DType::F32 ? tolerance() : std::max(tolerance(), 3e-3);
  }
  std::string name() const { return GetParam().fixture + " on " + GetParam().device; }
  // The context the fixture's runs take (LongRoPE's factors follow it), or the model's (0).
  int64_t context() const { return f_.expected.value("context", int64_t{0}); }

  Fixture f_;
  bool half_weights_ = false, quantized_experts_ = false;
  std::unique_ptr<Backend> backend_;
};

TEST_P(ModelParity, LogitsMatchTransformersAtEveryPosition) {
  const Fixture& f = f_;
  for (const DType cache : caches()) {
    Transformer transformer(*f.model, *backend_, context(), Transformer::kDefaultChunkTokens, cache);
    const double rel_tol = tolerance(cache);
    const auto& prompts = f.expected.at("prompts");
    for (size_t p = 0; p < prompts.size(); ++p) {
      const std::vector<float> logits = all_logits(transformer, f.model->config.vocab_size, prompts[p]);
      const std::string what =
          name() + " prompt " + std::to_string(p) + ", " + std::string(dtype_name(cache)) + " KV cache";
      // On the GPU, half weights round the activations: transformers' own half-precision run
      // shows how far that alone moves these logits.
      const double rounding =
          GetParam().device == "cuda" && half_weights_ && f.expected.contains("logits_native")
              ? 1.5 * max_difference(f.expected.at("logits_native")[p], f.expected.at("logits")[p])
              : 0.0;
      expect_logits_close(logits, f.expected.at("logits")[p], rel_tol, what, rounding);
      if (f.expected.contains("logits_native"))
        expect_logits_close(logits, f.expected.at("logits_native")[p], 5e-2,
                            what + " vs native half-precision");
    }
  }
}

TEST_P(ModelParity, PrefillInSmallChunksEqualsOnePass) {
  const Fixture& f = f_;
  const auto ids = f.expected.at("prompts").back().get<std::vector<int32_t>>();
  // Chunks of 3 tokens run the decode GEMV where one pass runs the GEMM: other summation
  // orders. With an f32 cache that is all; a 16-bit cache (the default of 16-bit models)
  // rounds keys and values to f16, where a last-bit difference can flip a rounding (2^-11
  // relative) that later layers amplify: checked there at the f16 cache's parity tolerance.
  // On the GPU, other chunk sizes are also other GEMM algorithms, which bf16/f16 activation
  // rounding amplifies. Tolerances above 1e-4 are relative to the largest logit; 1e-4 is
  // absolute.
  for (const DType cache : caches()) {
    SCOPED_TRACE(std::string(dtype_name(cache)) + " KV cache");
    Transformer whole(*f.model, *backend_, context(), Transformer::kDefaultChunkTokens, cache);
    Transformer chunked(*f.model, *backend_, context(), /*chunk_tokens=*/3, cache);
    const Tensor a = whole.forward_last(ids);
    const std::vector<float> first(a.as<float>(), a.as<float>() + a.numel());
    const Tensor b = chunked.forward_last(ids);
    float largest = 0;
    for (const float v : first) largest = std::max(largest, std::abs(v));
    const double rel_tol = tolerance(cache);
    const float tol = rel_tol > 1e-4 ? static_cast<float>(rel_tol) * largest : 1e-4f;
    for (int64_t i = 0; i < b.numel(); ++i) EXPECT_NEAR(first[static_cast<size_t>(i)], b.as<float>()[i], tol);
  }
}

TEST_P(ModelParity, GreedyContinuationMatchesTransformers) {
  const Fixture& f = f_;
  const std::filesystem::path peer = kFixtures / GetParam().fixture / "llama_cpp_greedy.json";
  const bool llama_cpp = quantized_experts_ && std::filesystem::exists(peer);
  if (rounded_activations() && !llama_cpp) GTEST_SKIP() << "rounded activations may flip near-ties";
  Transformer transformer(*f.model, *backend_, context());
  const nlohmann::json expected = llama_cpp ? read_json_file(peer).at("greedy") : f.expected.at("greedy");
  for (const auto& case_ : expected) {
    GenerateRequest request;
    request.prompt = case_.at("prompt").get<std::vector<int32_t>>();
    request.max_new_tokens = 32;
    request.ignore_eos = true;
    const GenerateResult result = generate(transformer, request);
    EXPECT_EQ(result.ids, case_.at("ids").get<std::vector<int32_t>>()) << name();
  }
}

// gpt-oss's MXFP4 experts, dequantized to f32: transformers' f32 logits, at the f32 tolerance.
TEST(ModelParity, Mxfp4ExpertsHoldTheCheckpointsWeightsExactly) {
  Fixture f = load_fixture("gpt_oss_mxfp4");
  ModelWeights& weights = f.model->weights;
  for (LayerWeights& l : weights.layers)
    for (Tensor* t : {&l.expert_gate, &l.expert_up, &l.expert_down}) {
      ASSERT_EQ(t->dtype, DType::MXFP4);
      Tensor f32 = weights.owned.allocate(DType::F32, {t->rows(), t->cols()});
      for (int64_t r = 0; r < t->rows(); ++r)
        quant::dequantize_row(DType::MXFP4, t->slice_rows(r, 1).data, f32.as<float>() + r * t->cols(),
                              t->cols());
      *t = f32;
    }
  const auto backend = make_cpu_backend();
  Transformer transformer(*f.model, *backend);
  const auto& prompts = f.expected.at("prompts");
  for (size_t p = 0; p < prompts.size(); ++p) {
    expect_logits_close(all_logits(transformer, f.model->config.vocab_size, prompts[p]),
                        f.expected.at("logits")[p], 1e-4,
                        "gpt_oss_mxfp4 dequantized, prompt " + std::to_string(p));
  }
}

// LongRoPE (phi4_mini): a run whose context exceeds the original one takes the long factors, as
// transformers does for a prompt longer than the original context.
using LongRopeParity = ModelParity;

TEST_P(LongRopeParity, BeyondTheOriginalContextTheLongFactorsMatchTransformers) {
  Transformer transformer(*f_.model, *backend_, 0, Transformer::kDefaultChunkTokens, DType::F32);
  const std::vector<float> all =
      all_logits(transformer, f_.model->config.vocab_size, f_.expected.at("long_prompt"));
  const nlohmann::json& theirs = f_.expected.at("long_logits");
  const size_t last = theirs.size() * static_cast<size_t>(f_.model->config.vocab_size);
  expect_logits_close(std::vector<float>(all.end() - static_cast<std::ptrdiff_t>(last), all.end()), theirs,
                      tolerance(), name() + " long prompt");
}

std::string case_name(const ::testing::TestParamInfo<DeviceCase>& param) {
  return param.param.fixture + "_" + param.param.device;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LongRopeParity,
                         ::testing::ValuesIn(testing::on_every_device({"phi4_mini"})), case_name);

INSTANTIATE_TEST_SUITE_P(Fixtures, ModelParity, ::testing::ValuesIn(parity_cases()), case_name);

// Mixtures of experts: every prompt token runs the experts transformers' router picks, in its
// order (the fixtures' routing margins keep f32 rounding from reordering them).
class ExpertParity : public ModelParity {};

TEST_P(ExpertParity, RoutingMatchesTransformers) {
  const Fixture& f = f_;
  Transformer transformer(*f.model, *backend_, 0, Transformer::kDefaultChunkTokens, DType::F32);
  std::vector<std::vector<int32_t>> layers;  // each layer's chosen experts, token-major
  transformer.observe_expert_routing([&](const ExpertRouting& r) { layers.push_back(r.chosen_experts); });
  const auto& prompts = f.expected.at("prompts");
  for (size_t p = 0; p < prompts.size(); ++p) {
    layers.clear();
    transformer.reset();
    transformer.forward_last(prompts[p].get<std::vector<int32_t>>());
    const auto& expected = f.expected.at("routing")[p];
    ASSERT_EQ(layers.size(), expected.size()) << name();
    for (size_t l = 0; l < layers.size(); ++l) {
      std::vector<int32_t> theirs;
      for (const auto& token : expected[l])
        for (const auto& e : token) theirs.push_back(e.get<int32_t>());
      EXPECT_EQ(layers[l], theirs) << name() << " prompt " << p << " layer " << l;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ExpertParity,
                         ::testing::ValuesIn(testing::on_every_device({"mixtral", "qwen3_moe", "gpt_oss",
                                                                       "gpt_oss_bf16", "gpt_oss_mxfp4"})),
                         [](const ::testing::TestParamInfo<DeviceCase>& param) {
                           return param.param.fixture + "_" + param.param.device;
                         });

TEST(ModelParity, DecodeStopsAtContextEnd) {
  const Fixture f = load_fixture("llama");
  const auto backend = make_cpu_backend();
  Transformer transformer(*f.model, *backend, /*context=*/8);
  GenerateRequest request;
  request.prompt = {5, 6, 7};
  request.max_new_tokens = 100;
  request.ignore_eos = true;
  const GenerateResult result = generate(transformer, request);
  EXPECT_EQ(result.finish, GenerateFinish::Context);
  EXPECT_EQ(result.ids.size(), 6u);  // 3 prompt + 5 forwarded + the last sampled token
  EXPECT_THROW(transformer.forward_last(std::vector<int32_t>{1}), Error);
}

}  // namespace
}  // namespace tokenmill
