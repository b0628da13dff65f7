// Reading PEFT LoRA adapters for inference (model/peft_adapter.h): the adapters PEFT saved for
// the llama and gpt2 fixtures (tests/fixtures/lora/, made by make_lora_fixtures.py), merged
// into their base models, give PeftModel's logits, also for a GGUF llama file whose q and k
// rows are interleaved, and for phi3's fused qkv_proj and gate_up_proj; and every kind of adapter it cannot
// serve is refused with a clear message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "backend/backend.h"
#include "convert/hf_to_gguf.h"
#include "core/json_file.h"
#include "formats/safetensors_writer.h"
#include "model/hf_export.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/peft_adapter.h"
#include "model/transformer.h"
#include "support/expect_error.h"
#include "support/lora_logits.h"
#include "support/temp_dir.h"

namespace tokenmill {
namespace {

using testing::expect_error;
using testing::TempDir;

const std::filesystem::path kFixtures = std::filesystem::path(TOKENMILL_FIXTURES_DIR);

void expect_peft_logits(const std::vector<float>& logits, const nlohmann::json& expected) {
  testing::expect_logits_near(logits, expected["logits"].get<std::vector<float>>(), 1e-4f);
}

class PeftAdapterParity : public ::testing::TestWithParam<std::string> {};

TEST_P(PeftAdapterParity, MergedIntoItsBaseGivesPeftModelsLogits) {
  const std::filesystem::path dir = kFixtures / "lora" / GetParam();
  const nlohmann::json expected = read_json_file(dir / "expected.json");
  const auto model = Model::load(kFixtures / "hf" / expected["base"].get<std::string>());
  const auto adapter = read_peft_adapter(model->config, dir);
  EXPECT_EQ(adapter->weights.scale, 1.0f);
  EXPECT_EQ(adapter->max_rank, GetParam() == "gpt2" ? 6 : 3);  // GPT-2's c_attn: rank_pattern 6
  // The targets the fixture adapts (GPT-2's k too, through c_attn, with zeros; phi3's all, through
  // its fused modules).
  const std::vector<LoraTarget> adapted = GetParam() == "gpt2" ? parse_lora_targets("q,k,v,o,up,down")
                                          : GetParam() == "smollm_chat_qv"
                                              ? parse_lora_targets("q,v")
                                              : parse_lora_targets("q,k,v,o,gate,up,down");
  for (const LoraTarget t : kLoraTargets)
    EXPECT_EQ(adapter->weights.at(1, t).a.data != nullptr, std::ranges::count(adapted, t) == 1)
        << lora_target_name(t);
  expect_peft_logits(
      testing::merged_lora_logits(*model, *adapter, expected["ids"].get<std::vector<int32_t>>()), expected);
}

INSTANTIATE_TEST_SUITE_P(Models, PeftAdapterParity,
                         ::testing::Values("llama", "gpt2", "phi3", "smollm_chat", "smollm_chat_qv"));

TEST(PeftAdapter, FollowsTheInterleavedQAndKRowsOfAGgufLlamaFile) {
  const TempDir tmp;
  const std::filesystem::path gguf = tmp.path() / "llama.gguf";
  convert_hf_to_gguf(kFixtures / "hf" / "llama", gguf, {.type = DType::F32});
  const auto model = Model::load(gguf);
  ASSERT_EQ(model->config.rope_layout, RopeLayout::Interleaved);
  const std::filesystem::path dir = kFixtures / "lora" / "llama";
  const nlohmann::json expected = read_json_file(dir / "expected.json");
  const auto adapter = read_peft_adapter(model->config, dir);
  expect_peft_logits(
      testing::merged_lora_logits(*model, *adapter, expected["ids"].get<std::vector<int32_t>>()), expected);
}

TEST(PeftAdapter, RsloraScalesByTheSquareRootOfTheRank) {
  const auto model = Model::load(kFixtures / "hf" / "llama");
  const TempDir tmp;
  std::filesystem::copy(kFixtures / "lora" / "llama", tmp.path() / "a");
  nlohmann::json config = read_json_file(tmp.path() / "a" / "adapter_config.json");
  config["use_rslora"] = true;
  write_json_file(tmp.path() / "a" / "adapter_config.json", config);
  const auto plain = read_peft_adapter(model->config, kFixtures / "lora" / "llama");
  const auto rslora = read_peft_adapter(model->config, tmp.path() / "a");
  const Tensor& b_plain = plain->weights.at(1, LoraTarget::Down).b;
  const Tensor& b_rs = rslora->weights.at(1, LoraTarget::Down).b;
  for (int64_t i = 0; i < b_plain.numel(); ++i)
    EXPECT_NEAR(b_rs.as<const float>()[i], b_plain.as<const float>()[i] * std::sqrt(3.0f), 1e-6f) << i;
}

// A copy of a fixture adapter, its config changed by `edit`.
class AdapterCopy {
 public:
  explicit AdapterCopy(const std::string& name = "llama") {
    std::filesystem::copy(kFixtures / "lora" / name, dir());
    config_ = read_json_file(dir() / "adapter_config.json");
  }
  std::filesystem::path dir() const { return tmp_.path() / "adapter"; }
  nlohmann::json& config() { return config_; }
  void save() const { write_json_file(dir() / "adapter_config.json", config_); }
  // Rewrites adapter_model.safetensors with the fixture's tensors, `extra` added.
  void write_tensors(const std::vector<std::pair<std::string, std::vector<int64_t>>>& extra,
                     bool drop_first_b) {
    SafetensorsWriter writer;
    const auto fill_with = [](float v) {
      return [v](std::span<std::byte> out) {
        for (size_t i = 0; i + sizeof(float) <= out.size(); i += sizeof(float))
          std::memcpy(&out[i], &v, sizeof v);
      };
    };
    writer.add("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", DType::F32, {3, 64},
               fill_with(0.1f));
    if (!drop_first_b)
      writer.add("base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight", DType::F32, {64, 3},
                 fill_with(0.1f));
    for (const auto& [name, shape] : extra) writer.add(name, DType::F32, shape, fill_with(0.1f));
    writer.write(dir() / "adapter_model.safetensors");
  }

 private:
  TempDir tmp_;
  nlohmann::json config_;
};

TEST(PeftAdapter, RefusesWhatItCannotServe) {
  const auto model = Model::load(kFixtures / "hf" / "llama");
  const auto read = [&](const AdapterCopy& copy) {
    return [&] { read_peft_adapter(model->config, copy.dir()); };
  };
  {
    AdapterCopy c;
    c.config()["peft_type"] = "PREFIX_TUNING";
    c.save();
    expect_error(read(c), {"adapter_config.json", "PREFIX_TUNING", "only LoRA"});
  }
  {
    AdapterCopy c;
    c.config()["use_dora"] = true;
    c.save();
    expect_error(read(c), {"use_dora is true", "only plain LoRA"});
  }
  {
    AdapterCopy c;
    c.config()["bias"] = "lora_only";
    c.save();
    expect_error(read(c), {"bias", "lora_only"});
  }
  {
    AdapterCopy c;
    c.config()["modules_to_save"] = {"lm_head"};
    c.save();
    expect_error(read(c), {"modules_to_save", "lm_head"});
  }
  {
    AdapterCopy c;
    c.config()["r"] = 4;
    c.save();
    expect_error(read(c), {"q_proj", "[3, 64]", "r = 4", "[4, 64]"});
  }
  {
    AdapterCopy c;
    c.config()["r"] = "3";
    c.save();
    expect_error(read(c), {"r must be an integer"});
  }
  {
    AdapterCopy c;
    c.config()["lora_alpha"] = 0;
    c.save();
    expect_error(read(c), {"lora_alpha must be a number > 0"});
  }
  {
    AdapterCopy c;
    c.config()["rank_pattern"] = {{"q_proj(", 2}};
    c.save();
    expect_error(read(c), {"'q_proj(' is not a regular expression"});
  }
  {
    AdapterCopy c;
    c.write_tensors({}, /*drop_first_b=*/true);
    expect_error(read(c), {"model.layers.0.self_attn.q_proj has lora_A but no lora_B"});
  }
  {
    AdapterCopy c;
    c.write_tensors({{"base_model.model.lm_head.lora_A.weight", {3, 64}}}, false);
    expect_error(read(c), {"module lm_head is not an adaptable linear layer"});
  }
  {
    AdapterCopy c;
    c.write_tensors({{"base_model.model.model.embed_tokens.lora_embedding_A", {3, 64}}}, false);
    expect_error(read(c), {"lora_embedding_A", "is not a LoRA A or B weight"});
  }
  {
    AdapterCopy c;
    std::filesystem::remove(c.dir() / "adapter_model.safetensors");
    std::ofstream(c.dir() / "adapter_model.bin") << "pickle";
    expect_error(read(c), {"no adapter_model.safetensors", "safe_serialization=True"});
  }
  {
    AdapterCopy c;
    std::filesystem::resize_file(c.dir() / "adapter_model.safetensors", 1000);
    expect_error(read(c), {"adapter_model.safetensors"});
  }
  {
    AdapterCopy c;
    std::filesystem::remove(c.dir() / "adapter_config.json");
    expect_error(read(c), {"not a PEFT adapter directory"});
  }
  // The gpt2 adapter's fused c_attn has rank 6 through rank_pattern; without it, r = 3 does not fit.
  const auto gpt2 = Model::load(kFixtures / "hf" / "gpt2");
  AdapterCopy c("gpt2");
  c.config()["rank_pattern"] = nlohmann::json::object();
  c.save();
  expect_error([&] { read_peft_adapter(gpt2->config, c.dir()); }, {"attn.c_attn", "[6, 64]", "r = 3"});
}

// An adapter made for one model names modules another does not have, or has other shapes.
TEST(PeftAdapter, RefusesAnAdapterOfAnotherModel) {
  const auto gpt2 = Model::load(kFixtures / "hf" / "gpt2");
  expect_error([&] { read_peft_adapter(gpt2->config, kFixtures / "lora" / "llama"); },
               {"module model.layers.0.", "is not an adaptable linear layer of this gpt2 model"});
  const auto mistral = Model::load(kFixtures / "hf" / "mistral");  // one kv head, not two
  expect_error([&] { read_peft_adapter(mistral->config, kFixtures / "lora" / "llama"); },
               {"k_proj: lora_A is [3, 64] and lora_B [32, 3]", "need [3, 64] and [16, 3]"});
}

// Fields of the wrong JSON type, and LoRA variants whose tensors look like plain LoRA's.
TEST(PeftAdapter, WrongTypesAndLoraVariantsAreErrorsNamingTheKey) {
  const auto model = Model::load(kFixtures / "hf" / "llama");
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {{{"peft_type", 5}}, "peft_type is 5"},
      {{{"bias", 1}}, "bias is 1"},
      {{{"r", 9223372036854775807.0}}, "r must be an integer"},
      {{{"r", nlohmann::json::array()}}, "r must be an integer"},
      {{{"lora_alpha", "5"}}, "lora_alpha must be a number"},
      {{{"rank_pattern", nlohmann::json::array({1})}}, "rank_pattern must be an object"},
      {{{"rank_pattern", {{"q_proj", "8"}}}}, "rank_pattern gives \"8\""},
      {{{"alpha_pattern", {{"q_proj", nullptr}}}}, "alpha_pattern gives null"},
      {{{"alora_invocation_tokens", {1, 2}}}, "alora_invocation_tokens is [1,2]"},
      {{{"lora_bias", true}}, "lora_bias is true"},
      {{{"layer_replication", {{0, 1}}}}, "layer_replication"},
      {{{"trainable_token_indices", {3}}}, "trainable_token_indices"},
      {{{"init_lora_weights", "pissa_niter_4"}}, "init_lora_weights is \"pissa_niter_4\""},
      {{{"init_lora_weights", "olora"}}, "changed base model"},
      {{{"lora_alpha", 1e300}}, "lora_B times the scale holds a value that is not finite"},
  };
  for (const auto& [change, message] : cases) {
    SCOPED_TRACE(change.dump());
    AdapterCopy c;
    c.config().update(change);
    c.save();
    expect_error([&] { read_peft_adapter(model->config, c.dir()); }, {"adapter", message});
  }
  AdapterCopy gaussian;  // an initialisation that leaves the base model alone
  gaussian.config()["init_lora_weights"] = "gaussian";
  gaussian.save();
  EXPECT_NO_THROW(read_peft_adapter(model->config, gaussian.dir()));
}

// rank_pattern / alpha_pattern as PEFT reads them: the exact module name first, else a key
// matching the name's end; keys that match with different values are ambiguous (PEFT takes the
// first in the file's order, which JSON objects do not keep).
TEST(PeftAdapter, PatternsTakeTheExactNameFirstAndRefuseAmbiguousMatches) {
  const auto model = Model::load(kFixtures / "hf" / "llama");
  const auto b_of = [](const LoraAdapter& a, int64_t layer) {
    return a.weights.at(layer, LoraTarget::Q).b.as<const float>()[5];
  };
  const auto plain = read_peft_adapter(model->config, kFixtures / "lora" / "llama");
  AdapterCopy c;
  c.config()["alpha_pattern"] = {{"q_proj", 10.0}, {"model.layers.0.self_attn.q_proj", 2.5}};
  c.save();
  const auto patterned = read_peft_adapter(model->config, c.dir());
  EXPECT_FLOAT_EQ(b_of(*patterned, 0), b_of(*plain, 0) * 0.5f);  // alpha 2.5 for 5
  EXPECT_FLOAT_EQ(b_of(*patterned, 1), b_of(*plain, 1) * 2.0f);  // alpha 10 for 5
  c.config()["alpha_pattern"] = {{"q_proj", 10.0}, {"self_attn.q_proj", 2.5}};
  c.save();
  expect_error([&] { read_peft_adapter(model->config, c.dir()); }, {"several keys", "q_proj"});
  c.config()["alpha_pattern"] = {{"q_proj", 10.0}, {"self_attn.q_proj", 10.0}};  // agreeing keys are fine
  c.save();
  EXPECT_FLOAT_EQ(b_of(*read_peft_adapter(model->config, c.dir()), 1), b_of(*plain, 1) * 2.0f);
}

// Garbage where adapter_config.json should be never crashes the reader.
TEST(PeftAdapter, GarbageConfigsAreErrors) {
  const auto model = Model::load(kFixtures / "hf" / "llama");
  uint64_t state = 12345;
  const std::string alphabet = "{}[]\":,0123456789.-aeLORAr_ptyenulfs \n";
  for (int trial = 0; trial < 300; ++trial) {
    AdapterCopy c;
    std::string text;
    const size_t length = 1 + (state >> 33) % 80;
    for (size_t i = 0; i < length; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      text.push_back(alphabet[(state >> 33) % alphabet.size()]);
    }
    if (trial % 3 == 0) text = R"({"peft_type": "LORA", "r": 3, "lora_alpha": )" + text;
    std::ofstream(c.dir() / "adapter_config.json", std::ios::trunc) << text;
    try {
      read_peft_adapter(model->config, c.dir());
    } catch (const Error&) {
    }
  }
}

}  // namespace
}  // namespace tokenmill
