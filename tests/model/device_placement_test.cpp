// The forward passes on a backend whose memory the host cannot touch (FencedBackend: the
// CPU backend behind PROT_NONE pages, opened only inside ops and copies), as a GPU backend's
// memory is: with the weights placed there, Transformer and PagedTransformer must give the
// plain CPU backend's logits bit for bit, never touching backend memory from the host
// (that would be a SIGSEGV). Without placed weights they refuse to start.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/byte_units.h"
#include "core/error.h"
#include "fenced_backend.h"
#include "model/paged_transformer.h"
#include "model/transformer.h"
#include "model/weight_placement.h"
#include "runtime/device_choice.h"
#include "support/random_tokens.h"

namespace tokenmill {
namespace {

using testing::FencedBackend;

const std::filesystem::path kFixtures(TOKENMILL_FIXTURES_DIR);

const char* const kModels[] = {"hf/llama", "hf/gpt2", "hf/qwen2", "gguf/llama_q4_1.gguf"};

std::string model_test_name(const ::testing::TestParamInfo<const char*>& info) {
  std::string name = info.param;
  std::replace_if(
      name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
  return name;
}

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
  const PagedTransformer::Slice step[] = {{a, 0, blocks_a, 1}, {b, 0, blocks_b, 1}};
  const std::vector<float> want = values(on_host.forward(step));
  EXPECT_EQ(values(on_device.forward(step)), want);
}

// A model too large for the device is refused before anything is copied, with its size.
TEST_P(DevicePlacement, AModelTooLargeIsRefusedWithItsSize) {
  FencedBackend small{make_cpu_backend()};
  const auto model = Model::load(kFixtures / GetParam());
  uint64_t bytes = 0;
  std::set<const void*> seen;
  for_each_op_weight(model->weights, [&](const Tensor& t) {
    if (t.data != nullptr && seen.insert(t.data).second) bytes += t.nbytes();
  });
  small.fenced_memory().set_available(bytes - 1);
  try {
    place_weights(model->weights, small.memory());
    ADD_FAILURE() << "placed " << bytes << " bytes in " << bytes - 1;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the model's weights need " + human_bytes(bytes)), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("only " + human_bytes(bytes - 1) + " is available"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(small.fenced_memory().allocations(), 0);
  EXPECT_TRUE(model->weights.memory->is_host());
  small.fenced_memory().set_available(bytes);
  place_weights(model->weights, small.memory());
  EXPECT_EQ(model->weights.memory, &small.memory());
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

// copy_mapped_weights (--no-mmap): the weights read in place from the mapped files move into
// one block of host memory; tensors already in the process's memory (converted at load) stay.
class HostCopy : public ::testing::TestWithParam<const char*> {
 protected:
  std::unique_ptr<Backend> cpu_ = make_cpu_backend();
  std::unique_ptr<Model> mapped_ = Model::load(kFixtures / GetParam());
  std::unique_ptr<Model> copied_ = Model::load(kFixtures / GetParam());
};

std::vector<Tensor> op_weights(ModelWeights& w) {
  std::vector<Tensor> all;
  for_each_op_weight(w, [&](Tensor& t) { all.push_back(t); });
  return all;
}

std::vector<unsigned char> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const unsigned char*>(t.data);
  return {p, p + t.nbytes()};
}

TEST_P(HostCopy, MappedWeightsMoveIntoOneBlockAndTheOthersStay) {
  ModelWeights& w = copied_->weights;
  const std::vector<Tensor> before = op_weights(w);
  std::set<const void*> mapped;
  for (const Tensor& t : mapped_op_weights(*copied_)) mapped.insert(t.data);
  ASSERT_FALSE(mapped.empty());
  copy_mapped_weights(*copied_);
  EXPECT_TRUE(mapped_op_weights(*copied_).empty());
  const std::vector<Tensor> after = op_weights(w);
  ASSERT_EQ(after.size(), before.size());
  int moved = 0, stayed = 0;
  for (size_t i = 0; i < before.size(); ++i) {
    if (before[i].data == nullptr) {
      EXPECT_EQ(after[i].data, nullptr);
      continue;
    }
    EXPECT_EQ(after[i].shape_string(), before[i].shape_string());
    EXPECT_EQ(bytes_of(after[i]), bytes_of(before[i]));
    if (mapped.count(before[i].data) != 0) {
      EXPECT_TRUE(w.placed.owns(after[i].data));
      ++moved;
    } else {  // converted at load (the process's own memory already): stays
      EXPECT_EQ(after[i].data, before[i].data);
      ++stayed;
    }
  }
  EXPECT_GT(moved, 0);
  EXPECT_GT(stayed, 0);
  if (before.back().data == before.front().data) {  // a tied lm_head stays tied
    EXPECT_EQ(w.lm_head.data, w.token_embedding.data);
  }
  const size_t placed = w.placed.bytes();
  copy_mapped_weights(*copied_);  // again: nothing left to copy
  EXPECT_EQ(w.placed.bytes(), placed);
}

TEST_P(HostCopy, ChooseDeviceCopiesOnTheCpuOnlyWhenAsked) {
  const DeviceChoice mapped = choose_device("cpu", *mapped_);
  EXPECT_FALSE(mapped_op_weights(*mapped_).empty());
  const DeviceChoice copied = choose_device("cpu", *copied_, HostWeights::Copied);
  EXPECT_TRUE(mapped_op_weights(*copied_).empty());
  EXPECT_GT(copied_->weights.placed.bytes(), 0u);
}

TEST_P(HostCopy, AModelBuiltInMemoryHasNothingToCopy) {
  Model built;  // views of another model's weights, no files of its own
  built.config = mapped_->config;
  built.weights = view_weights(mapped_->weights);
  EXPECT_TRUE(mapped_op_weights(built).empty());
  copy_mapped_weights(built);
  EXPECT_EQ(built.weights.placed.bytes(), 0u);
  EXPECT_EQ(built.weights.layers[0].q.data, mapped_->weights.layers[0].q.data);
}

TEST_P(HostCopy, CopiedWeightsGiveTheMappedLogitsBitForBit) {
  copy_mapped_weights(*copied_);
  const int64_t vocab = mapped_->config.vocab_size;
  const std::vector<int32_t> prompt = testing::random_token_ids(11, vocab, 5);
  Transformer from_file(*mapped_, *cpu_), from_copy(*copied_, *cpu_);
  std::vector<float> want(prompt.size() * static_cast<size_t>(vocab)), got(want.size());
  from_file.forward_all(prompt, want);
  from_copy.forward_all(prompt, got);
  EXPECT_EQ(got, want);
  const int32_t token = prompt.back();
  EXPECT_EQ(values(from_copy.forward_last({&token, 1})), values(from_file.forward_last({&token, 1})));
}

TEST(HostCopyRefusal, WeightsOnADeviceAreNotCopiedToTheHost) {
  FencedBackend fenced{make_cpu_backend()};
  std::unique_ptr<Model> model = Model::load(kFixtures / "hf/llama");
  place_weights(model->weights, fenced.memory());
  EXPECT_THROW(copy_mapped_weights(*model), Error);
}

INSTANTIATE_TEST_SUITE_P(Models, HostCopy, ::testing::ValuesIn(kModels), model_test_name);

INSTANTIATE_TEST_SUITE_P(Models, DevicePlacement, ::testing::ValuesIn(kModels), model_test_name);

}  // namespace
}  // namespace tokenmill
