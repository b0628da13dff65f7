// PagedTransformer (the serving engine's batched forward) against the single-sequence
// Transformer: for one sequence the two run the same ops on the same rows, and
// Backend::paged_attention promises the bits of attention over a contiguous cache, so the
// logits must be identical, step for step (prefill in chunks, then decode), with the
// sequence's blocks scattered over the pool. For a quantized model every op is row-wise
// exact, so a sequence's logits must not change when other sequences share its steps.
#include <algorithm>
#include <filesystem>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "backend/backend.h"
#include "core/error.h"
#include "model/paged_transformer.h"
#include "model/transformer.h"
#include "runtime/device_choice.h"
#include "support/gpu_devices.h"
#include "support/random_tokens.h"

namespace tokenmill {
namespace {

const std::filesystem::path kFixtures(TOKENMILL_FIXTURES_DIR);

std::vector<float> row(const Tensor& logits, int64_t r) {
  const float* p = logits.as<const float>() + r * logits.cols();
  return {p, p + logits.cols()};
}

// Blocks 2b+1 in reverse order: far from contiguous, and in another order than positions.
std::vector<int32_t> scattered_blocks(int64_t count) {
  std::vector<int32_t> blocks(static_cast<size_t>(count));
  for (int64_t b = 0; b < count; ++b)
    blocks[static_cast<size_t>(b)] = static_cast<int32_t>(2 * (count - b) - 1);
  return blocks;
}

class PagedTransformerTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    model_ = Model::load(kFixtures / GetParam());
    backend_ = make_cpu_backend();
  }
  std::unique_ptr<Model> model_;
  std::unique_ptr<Backend> backend_;
};

TEST_P(PagedTransformerTest, OneSequenceMatchesTheTransformerBitForBit) {
  constexpr int64_t kBlock = 8, kChunk = 13;
  const std::vector<int32_t> prompt =
      testing::random_token_ids(40, static_cast<int32_t>(model_->config.vocab_size), 7);
  Transformer reference(*model_, *backend_, 0, kChunk);
  PagedTransformer paged(*model_, *backend_, 32, kBlock, 64, 4, model_->default_kv_dtype());
  const std::vector<int32_t> blocks = scattered_blocks(12);

  // Prefill in chunks of kChunk (the reference's chunking), then 6 greedy decode steps.
  std::vector<int32_t> tokens = prompt;
  std::vector<float> expected;
  for (int64_t begin = 0; begin < static_cast<int64_t>(prompt.size()); begin += kChunk) {
    const auto count = std::min<int64_t>(kChunk, static_cast<int64_t>(prompt.size()) - begin);
    const std::span<const int32_t> chunk(prompt.data() + begin, static_cast<size_t>(count));
    const bool last = begin + count == static_cast<int64_t>(prompt.size());
    const PagedTransformer::Slice slice{chunk, begin, blocks, last};
    const Tensor got = paged.forward(std::span(&slice, 1));
    if (last) {
      expected = row(reference.forward_last(prompt), 0);
      ASSERT_EQ(got.rows(), 1);
      EXPECT_EQ(row(got, 0), expected);
    } else {
      EXPECT_EQ(got.rows(), 0);
    }
  }
  for (int step = 0; step < 6; ++step) {
    const auto next =
        static_cast<int32_t>(std::max_element(expected.begin(), expected.end()) - expected.begin());
    tokens.push_back(next);
    const PagedTransformer::Slice slice{std::span(&tokens.back(), 1), static_cast<int64_t>(tokens.size()) - 1,
                                        blocks, 1};
    const Tensor got = paged.forward(std::span(&slice, 1));
    expected = row(reference.forward_last(std::span(&tokens.back(), 1)), 0);
    EXPECT_EQ(row(got, 0), expected) << "decode step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, PagedTransformerTest,
                         ::testing::Values("hf/llama", "hf/gpt2", "hf/qwen2", "hf/mixtral", "hf/qwen3_moe",
                                           "hf/gemma2", "hf/gemma3", "hf/gpt_oss_mxfp4",
                                           "gguf/llama_q4_1.gguf", "gguf/gpt2_q8_0.gguf"),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           std::replace_if(
                               name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
                           return name;
                         });

// A model whose every layer slides (Mistral's window of 24): the blocks wholly before a step's
// first window may be the pool's block of zeros (id num_blocks, as the serving engine's
// released blocks are), and the logits keep their bits: positions before a window get
// probability 0, whatever keys and values the kernels find there.
class PagedTransformerWindow : public ::testing::TestWithParam<testing::DeviceCase> {};

TEST_P(PagedTransformerWindow, BlocksBeforeEveryWindowMayBeTheBlockOfZeros) {
  const auto model = Model::load(kFixtures / "hf" / GetParam().fixture);
  const auto backend = choose_device(GetParam().device, *model).backend;
  const int64_t window = model->config.attention_span();
  ASSERT_EQ(window, 24);
  constexpr int64_t kBlock = 4, kChunk = 7, kBlocks = 40;
  PagedTransformer whole(*model, *backend, kBlocks, kBlock, 16, 1, DType::F32);
  PagedTransformer released(*model, *backend, kBlocks, kBlock, 16, 1, DType::F32);
  const std::vector<int32_t> blocks = scattered_blocks(kBlocks / 2);
  std::vector<int32_t> released_blocks = blocks;
  std::vector<int32_t> tokens =
      testing::random_token_ids(50, static_cast<int32_t>(model->config.vocab_size), 9);
  int64_t done = 0, nulls = 0;
  const auto step = [&](int64_t count) {
    // Every block wholly before the first position this step's queries see.
    for (int64_t b = 0; (b + 1) * kBlock <= done + 1 - window; ++b)
      released_blocks[static_cast<size_t>(b)] = static_cast<int32_t>(kBlocks);
    nulls = std::count(released_blocks.begin(), released_blocks.end(), static_cast<int32_t>(kBlocks));
    const std::span<const int32_t> chunk(tokens.data() + done, static_cast<size_t>(count));
    const PagedTransformer::Slice a{chunk, done, blocks, 1}, b{chunk, done, released_blocks, 1};
    const std::vector<float> want = row(whole.forward(std::span(&a, 1)), 0);
    EXPECT_EQ(row(released.forward(std::span(&b, 1)), 0), want) << "positions " << done << "+" << count;
    done += count;
    return want;
  };
  while (done < static_cast<int64_t>(tokens.size()))
    step(std::min<int64_t>(kChunk, static_cast<int64_t>(tokens.size()) - done));
  for (int i = 0; i < 20; ++i) {
    tokens.push_back(static_cast<int32_t>(i * 7 % 200 + 3));
    step(1);
  }
  EXPECT_EQ(nulls, (69 + 1 - window) / kBlock);  // the last step saw positions 46..69
}

INSTANTIATE_TEST_SUITE_P(Mistral, PagedTransformerWindow,
                         ::testing::ValuesIn(testing::on_every_device({"mistral"})),
                         [](const auto& param_info) {
                           return param_info.param.fixture + "_" + param_info.param.device;
                         });

// Quantized weights: the row-wise exact matmul makes the batch invisible to each sequence.
TEST(PagedTransformerBatch, QuantizedLogitsDoNotDependOnTheBatch) {
  const auto model = Model::load(kFixtures / "gguf/llama_q4_1.gguf");
  const auto backend = make_cpu_backend();
  constexpr int64_t kBlock = 4;
  const auto vocab = static_cast<int32_t>(model->config.vocab_size);
  PagedTransformer paged(*model, *backend, 64, kBlock, 96, 8, model->default_kv_dtype());
  const std::vector<int32_t> a = testing::random_token_ids(11, vocab, 1),
                             b = testing::random_token_ids(23, vocab, 2),
                             c = testing::random_token_ids(5, vocab, 3);
  const std::vector<int32_t> blocks_a = {0, 1, 2}, blocks_b = {10, 9, 8, 7, 6, 5}, blocks_c = {20, 30};

  const PagedTransformer::Slice alone{a, 0, blocks_a, 1};
  const std::vector<float> solo = row(paged.forward(std::span(&alone, 1)), 0);
  const PagedTransformer::Slice batch[] = {{b, 0, blocks_b, 1}, {a, 0, blocks_a, 1}, {c, 0, blocks_c, 0}};
  const Tensor together = paged.forward(batch);
  ASSERT_EQ(together.rows(), 2);
  EXPECT_EQ(row(together, 1), solo);
}

TEST(PagedTransformerErrors, RefusesStepsOutsideItsLimits) {
  const auto model = Model::load(kFixtures / "hf/llama");
  const auto backend = make_cpu_backend();
  EXPECT_THROW(PagedTransformer(*model, *backend, 8, 6, 16, 2, DType::F32), Error);  // block size not 2^k
  PagedTransformer paged(*model, *backend, 8, 4, 16, 2, DType::F32);
  const std::vector<int32_t> ids(17, 1), few(5, 1);
  const std::vector<int32_t> blocks = {0, 1, 2, 3, 4};
  const PagedTransformer::Slice too_many{ids, 0, blocks, 1};
  EXPECT_THROW(paged.forward(std::span(&too_many, 1)), Error);
  const std::vector<int32_t> short_table = {0};
  const PagedTransformer::Slice short_blocks{few, 0, short_table, 1};
  EXPECT_THROW(paged.forward(std::span(&short_blocks, 1)), Error);
  const std::vector<int32_t> outside = {0, 99};
  const PagedTransformer::Slice bad_block{few, 0, outside, 1};
  EXPECT_THROW(paged.forward(std::span(&bad_block, 1)), Error);
  const std::vector<int32_t> zeros_block = {0, 8};  // the block of zeros is never written
  const PagedTransformer::Slice into_zeros{few, 0, zeros_block, 1};
  EXPECT_THROW(paged.forward(std::span(&into_zeros, 1)), Error);
}

}  // namespace
}  // namespace tokenmill
