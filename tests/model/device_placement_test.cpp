// The forward passes on a backend whose memory the host cannot touch (FencedBackend: the
// CPU backend behind PROT_NONE pages, opened only inside ops and copies), as a GPU backend's
// memory is: with the weights placed there, Transformer and PagedTransformer must give the
// plain CPU backend's logits bit for bit, never touching backend memory from the host
// (that would be a SIGSEGV). Without placed weights they refuse to start.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "fenced_backend.h"
#include "model/paged_transformer.h"
#include "model/transformer.h"
#include "model/weight_placement.h"
#include "support/random_tokens.h"

namespace tokenmill {
namespace {

using testing::FencedBackend;

const std::filesystem::path kFixtures(TOKENMILL_FIXTURES_DIR);

std::vector<float> values(const Tensor& t) { return {t.as<const float>(), t.as<const float>() + t.numel()}; }

class DevicePlacement : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    host_model_ = Model::load(kFixtures / GetParam());
    device_model_ = Model::load(kFixtures / GetParam());
    place_weights(device_model_->weights, fenced_.memory());
  }

  // Declared first, destroyed last: the placed weights live in its memory.
  FencedBackend fenced_{make_cpu_backend()};
  std::unique_ptr<Backend> cpu_ = make_cpu_backend();
  std::unique_ptr<Model> host_model_, device_model_;
};

TEST_P(DevicePlacement, EveryOpWeightIsCopiedAndTiedWeightsStayTied) {
  ModelWeights& w = device_model_->weights;
  EXPECT_EQ(w.memory, &fenced_.memory());
  int placed = 0;
  for_each_op_weight(w, [&](Tensor& t) {
    if (t.data == nullptr) return;
    EXPECT_TRUE(fenced_.fenced_memory().owns(t.data));
    ++placed;
  });
  EXPECT_GT(placed, 0);
  if (host_model_->weights.lm_head.data == host_model_->weights.token_embedding.data) {
    EXPECT_EQ(w.lm_head.data, w.token_embedding.data);
  }
  EXPECT_GT(fenced_.fenced_memory().bytes_in(), 0u);
  place_weights(w, fenced_.memory());  // again: nothing to do
  EXPECT_EQ(w.memory, &fenced_.memory());
}

TEST_P(DevicePlacement, TransformerGivesTheHostLogitsBitForBit) {
  const int64_t vocab = host_model_->config.vocab_size;
  const std::vector<int32_t> prompt = testing::random_token_ids(19, vocab, 3);
  Transformer on_host(*host_model_, *cpu_, 0, /*chunk_tokens=*/8);
  Transformer on_device(*device_model_, fenced_, 0, /*chunk_tokens=*/8);

  std::vector<float> want(prompt.size() * static_cast<size_t>(vocab)), got(want.size());
  on_host.forward_all(prompt, want);
  on_device.forward_all(prompt, got);
  EXPECT_EQ(got, want);

  int32_t token = prompt.back();
  for (int step = 0; step < 4; ++step) {
    const std::vector<float> expected = values(on_host.forward_last({&token, 1}));
    EXPECT_EQ(values(on_device.forward_last({&token, 1})), expected) << "decode step " << step;
    token = static_cast<int32_t>(std::max_element(expected.begin(), expected.end()) - expected.begin());
  }
  EXPECT_GT(fenced_.ops(), 0);
  EXPECT_GT(fenced_.fenced_memory().bytes_out(), 0u);
}

TEST_P(DevicePlacement, PagedTransformerGivesTheHostLogitsBitForBit) {
  const int64_t vocab = host_model_->config.vocab_size;
  const DType kv = host_model_->default_kv_dtype();
  PagedTransformer on_host(*host_model_, *cpu_, 16, 4, 48, 3, kv);
  PagedTransformer on_device(*device_model_, fenced_, 16, 4, 48, 3, kv);
  const std::vector<int32_t> a = testing::random_token_ids(9, vocab, 1),
                             b = testing::random_token_ids(14, vocab, 2);
  const std::vector<int32_t> blocks_a = {5, 2, 7}, blocks_b = {0, 9, 3, 12};
  const PagedTransformer::Slice step[] = {{a, 0, blocks_a, true}, {b, 0, blocks_b, true}};
  const std::vector<float> want = values(on_host.forward(step));
  EXPECT_EQ(values(on_device.forward(step)), want);
}

TEST_P(DevicePlacement, WeightsLeftOnTheHostAreRefused) {
  try {
    Transformer t(*host_model_, fenced_);
    FAIL() << "a Transformer started with host weights on a device backend";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("place_weights"), std::string::npos) << e.what();
  }
  EXPECT_THROW(PagedTransformer(*host_model_, fenced_, 8, 4, 16, 2, DType::F32), Error);
}

INSTANTIATE_TEST_SUITE_P(Models, DevicePlacement,
                         ::testing::Values("hf/llama", "hf/gpt2", "hf/qwen2", "gguf/llama_q4_1.gguf"),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           std::replace_if(
                               name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
                           return name;
                         });

}  // namespace
}  // namespace tokenmill
