// `serve --lora NAME=DIR` (serve/lora_adapters.h): the flag's form, and the adapters loaded
// for the served model with their names checked and their ranks within the backends' limit.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "core/json_file.h"
#include "formats/safetensors_writer.h"
#include "model/hf_export.h"
#include "model/model.h"
#include "serve/lora_adapters.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace tokenmill {
namespace {

using testing::expect_error;

const std::filesystem::path kFixtures(TOKENMILL_FIXTURES_DIR);

TEST(LoraAdapterSpec, ParsesNameEqualsDirectory) {
  const LoraAdapterSpec spec = parse_lora_adapter_spec("sql-v2.1:prod/a_b=/models/adapters/sql=x");
  EXPECT_EQ(spec.name, "sql-v2.1:prod/a_b");
  EXPECT_EQ(spec.dir, "/models/adapters/sql=x");
  for (const char* bad : {"", "sql", "=dir", "sql=", "has space=dir", "naïve=dir", "a\"b=dir"})
    expect_error([&] { parse_lora_adapter_spec(bad); }, {"--lora"});
  expect_error([&] { parse_lora_adapter_spec(std::string(129, 'a') + "=dir"); }, {"1 to 128"});
  EXPECT_EQ(parse_lora_adapter_spec(std::string(128, 'a') + "=dir").name.size(), 128u);
}

TEST(LoraAdapters, LoadsEachAdapterAndChecksTheNames) {
  const auto model = Model::load(kFixtures / "hf" / "smollm_chat");
  const std::vector<LoraAdapterSpec> specs = {{"all", kFixtures / "lora" / "smollm_chat"},
                                              {"qv", kFixtures / "lora" / "smollm_chat_qv"}};
  const auto adapters = load_lora_adapters(model->config, specs, "smollm", host_memory());
  ASSERT_EQ(adapters.size(), 2u);
  EXPECT_NE(adapters[0]->weights.at(0, LoraTarget::Down).a.data, nullptr);
  EXPECT_EQ(adapters[1]->weights.at(0, LoraTarget::Down).a.data, nullptr);
  const std::vector<LoraAdapterSpec> twice = {specs[0], {"all", specs[1].dir}};
  expect_error([&] { load_lora_adapters(model->config, twice, "smollm", host_memory()); },
               {"--lora all", "given twice"});
  expect_error([&] { load_lora_adapters(model->config, specs, "qv", host_memory()); },
               {"--lora qv", "the served model's own"});
}

TEST(LoraAdapters, RefusesARankBeyondTheBackendsLimit) {
  const auto model = Model::load(kFixtures / "hf" / "smollm_chat");
  const testing::TempDir tmp;
  const int64_t rank = Backend::kMaxLoraRank + 1;
  nlohmann::json config = read_json_file(kFixtures / "lora" / "smollm_chat_qv" / "adapter_config.json");
  config["r"] = rank;
  write_json_file(tmp.path() / "adapter_config.json", config);
  SafetensorsWriter writer;
  const auto zeros = [](std::span<std::byte> out) { std::memset(out.data(), 0, out.size()); };
  writer.add("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", DType::F32, {rank, 64}, zeros);
  writer.add("base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight", DType::F32, {64, rank}, zeros);
  writer.write(tmp.path() / "adapter_model.safetensors");
  const std::vector<LoraAdapterSpec> specs = {{"big", tmp.path()}};
  expect_error([&] { load_lora_adapters(model->config, specs, "smollm", host_memory()); },
               {"--lora big", "rank 1025 exceeds"});
}

}  // namespace
}  // namespace tokenmill
