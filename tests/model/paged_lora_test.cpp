// Multi-LoRA steps of the PagedTransformer: sequences of the base model and of two adapters
// (a PEFT fixture's, and the same with half its lora_alpha) in one step. Each adapted
// sequence's logits are PeftModel's (tests/fixtures/lora/<name>/expected.json) and those of
// the base model with its adapter merged; the base model's rows are those of a step without
// adapters. On the CPU and, when the build has one, the (emulated) GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/json_file.h"
#include "model/hf_export.h"
#include "model/paged_transformer.h"
#include "model/peft_adapter.h"
#include "model/transformer.h"
#include "runtime/device_choice.h"
#include "support/gpu_devices.h"
#include "support/lora_logits.h"
#include "support/temp_dir.h"

namespace tokenmill {
namespace {

const std::filesystem::path kFixtures(TOKENMILL_FIXTURES_DIR);

std::vector<float> rows_of(const Tensor& logits, int64_t first, int64_t count) {
  const float* p = logits.as<const float>() + first * logits.cols();
  return {p, p + count * logits.cols()};
}

// Every position's logits of `ids` from the model in `model_dir` with the adapter in `adapter_dir` merged.
std::vector<float> merged_logits(const std::filesystem::path& model_dir,
                                 const std::filesystem::path& adapter_dir, const std::vector<int32_t>& ids) {
  const auto model = Model::load(model_dir);
  return testing::merged_lora_logits(*model, *read_peft_adapter(model->config, adapter_dir), ids);
}

class PagedLora : public ::testing::TestWithParam<testing::DeviceCase> {};

TEST_P(PagedLora, AdaptersAndTheBaseModelShareAStep) {
  const std::string& name = GetParam().fixture;
  const std::filesystem::path model_dir = kFixtures / "hf" / name, peft_dir = kFixtures / "lora" / name;
  const nlohmann::json expected = read_json_file(peft_dir / "expected.json");
  const auto ids = expected["ids"].get<std::vector<int32_t>>();
  const auto n = static_cast<int64_t>(ids.size());
  // A second adapter: the same tensors at half the scale.
  const testing::TempDir tmp;
  const std::filesystem::path half_dir = tmp.path() / "half";
  std::filesystem::copy(peft_dir, half_dir);
  nlohmann::json config = read_json_file(half_dir / "adapter_config.json");
  config["lora_alpha"] = config["lora_alpha"].get<double>() / 2;
  for (auto& [module, alpha] : config["alpha_pattern"].items()) alpha = alpha.get<double>() / 2;
  write_json_file(half_dir / "adapter_config.json", config);

  const auto model = Model::load(model_dir);
  const auto backend = choose_device(GetParam().device, *model).backend;
  const auto peft = read_peft_adapter(model->config, peft_dir, backend->memory());
  const auto half = read_peft_adapter(model->config, half_dir, backend->memory());
  constexpr int64_t kBlock = 4;
  PagedTransformer paged(*model, *backend, 32, kBlock, 64, 8, model->default_kv_dtype(), 0, 64);
  const std::vector<int32_t> blocks[] = {{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}};

  const PagedTransformer::Slice alone{ids, 0, blocks[0], n};
  const std::vector<float> base = rows_of(paged.forward(std::span(&alone, 1)), 0, n);
  // Base, PEFT's adapter, half of it, PEFT's again (not next to the first: two segments of
  // one adapter) and the base model: every row's logits.
  const PagedTransformer::Slice step[] = {{ids, 0, blocks[0], n, nullptr},
                                          {ids, 0, blocks[1], n, &peft->weights},
                                          {ids, 0, blocks[2], n, &half->weights},
                                          {ids, 0, blocks[3], n, &peft->weights},
                                          {ids, 0, blocks[4], n, nullptr}};
  const Tensor logits = paged.forward(step);
  ASSERT_EQ(logits.rows(), 5 * n);
  const auto want = expected["logits"].get<std::vector<float>>();
  const std::vector<float> want_half = merged_logits(model_dir, half_dir, ids);
  testing::expect_logits_near(rows_of(logits, n, n), want, 1e-4f);
  testing::expect_logits_near(rows_of(logits, 3 * n, n), want, 1e-4f);
  testing::expect_logits_near(rows_of(logits, 2 * n, n), want_half, 1e-4f);
  testing::expect_logits_near(rows_of(logits, 0, n), base, 1e-5f);
  testing::expect_logits_near(rows_of(logits, 4 * n, n), base, 1e-5f);
  EXPECT_GT(std::fabs(want_half[7] - want[7]) + std::fabs(want_half[100] - want[100]), 1e-3f);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PagedLora,
                         ::testing::ValuesIn(testing::on_every_device({"llama", "gpt2", "phi3"})),
                         [](const auto& param_info) {
                           return param_info.param.fixture + "_" + param_info.param.device;
                         });

TEST(PagedLoraErrors, RefusesAnAdapterOfAnotherModel) {
  const auto model = Model::load(kFixtures / "hf" / "llama");
  const auto backend = make_cpu_backend();
  PagedTransformer paged(*model, *backend, 8, 4, 16, 2, model->default_kv_dtype());
  LoraWeights short_adapter;
  short_adapter.scale = 1.0f;
  short_adapter.layers.resize(1);
  const std::vector<int32_t> ids = {1, 2, 3}, blocks = {0};
  const PagedTransformer::Slice slice{ids, 0, blocks, 1, &short_adapter};
  EXPECT_THROW(paged.forward(std::span(&slice, 1)), Error);
}

}  // namespace
}  // namespace tokenmill
