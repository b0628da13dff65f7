// A damaged model directory gives a tokenmill::Error that names the file and the
// tensor or field at fault, never a crash. Each case copies a good fixture to a
// temporary directory and breaks one thing.
#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/json_file.h"
#include "model/model.h"
#include "support/temp_dir.h"

namespace tokenmill {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(TOKENMILL_FIXTURES_DIR) / "hf";

// A writable copy of fixture `name`.
class BrokenModel {
 public:
  explicit BrokenModel(const std::string& name) {
    for (const auto& entry : fs::directory_iterator(kFixtures / name))
      fs::copy_file(entry.path(), dir_.path() / entry.path().filename());
  }
  const fs::path& path() const { return dir_.path(); }

  void edit_config(const std::function<void(nlohmann::json&)>& edit) const {
    nlohmann::json config = read_json_file(path() / "config.json");
    edit(config);
    dir_.write("config.json", config.dump());
  }

  std::string load_error() const {
    try {
      Model::load(path());
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  }

  const testing::TempDir& dir() const { return dir_; }

 private:
  testing::TempDir dir_;
};

TEST(ModelLoadErrors, MissingDirectoryAndConfig) {
  EXPECT_EQ(BrokenModel("llama").load_error(), "no error");
  try {
    Model::load("/nonexistent/model");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("does not exist"));
  }
  BrokenModel m("llama");
  fs::remove(m.path() / "config.json");
  EXPECT_THAT(m.load_error(), HasSubstr("config.json: not found"));
}

TEST(ModelLoadErrors, InvalidConfigJson) {
  BrokenModel m("llama");
  m.dir().write("config.json", "{\"architectures\": [");
  EXPECT_THAT(m.load_error(), HasSubstr("invalid JSON"));
  m.dir().write("config.json", "{\"hidden_size\": 1e999}");  // out of a double's range
  EXPECT_THAT(m.load_error(), HasSubstr("invalid JSON"));
}

TEST(ModelLoadErrors, UnknownArchitecture) {
  BrokenModel m("llama");
  m.edit_config([](auto& c) { c["architectures"] = {"FalconForCausalLM"}; });
  EXPECT_THAT(m.load_error(), HasSubstr("unsupported architecture 'FalconForCausalLM'"));
}

TEST(ModelLoadErrors, ConfigShapeDisagreesWithTensors) {
  BrokenModel m("llama");
  m.edit_config([](auto& c) { c["intermediate_size"] = 96; });
  const std::string error = m.load_error();
  EXPECT_THAT(error, HasSubstr("model.layers.0.mlp.gate_proj.weight"));
  EXPECT_THAT(error, HasSubstr("expected [96, 64]"));
}

TEST(ModelLoadErrors, ExpertCountsThatDisagree) {
  BrokenModel more_experts("mixtral");
  more_experts.edit_config([](auto& c) { c["num_local_experts"] = 5; });
  EXPECT_THAT(more_experts.load_error(), HasSubstr("model.layers.0.block_sparse_moe.gate.weight"));
  BrokenModel too_many_per_token("qwen3_moe");
  too_many_per_token.edit_config([](auto& c) { c["num_experts_per_tok"] = 9; });
  EXPECT_THAT(too_many_per_token.load_error(),
              HasSubstr("field 'num_experts_per_tok' = 9 is outside [1, 8]"));
  BrokenModel missing("mixtral");
  missing.edit_config([](auto& c) { c.erase("num_local_experts"); });
  EXPECT_THAT(missing.load_error(), HasSubstr("missing required field 'num_local_experts'"));
  BrokenModel dense_layers("qwen3_moe");
  dense_layers.edit_config([](auto& c) { c["mlp_only_layers"] = {1}; });
  EXPECT_THAT(dense_layers.load_error(), HasSubstr("mlp_only_layers"));
  BrokenModel wider("qwen3_moe");
  wider.edit_config([](auto& c) { c["moe_intermediate_size"] = 48; });
  EXPECT_THAT(wider.load_error(), HasSubstr("model.layers.0.mlp.experts.0.gate_proj.weight"));
}

// gpt-oss: fused experts (plain or MXFP4) whose width or count disagrees with the config, a
// YaRN without its original context.
TEST(ModelLoadErrors, GptOssFieldsThatDisagreeWithTheWeights) {
  BrokenModel wider("gpt_oss");
  wider.edit_config([](auto& c) { c["intermediate_size"] = 48; });
  EXPECT_THAT(wider.load_error(), HasSubstr("model.layers.0.mlp.experts.gate_up_proj"));
  BrokenModel narrower("gpt_oss_mxfp4");
  narrower.edit_config([](auto& c) { c["intermediate_size"] = 16; });
  EXPECT_THAT(narrower.load_error(), HasSubstr("model.layers.0.mlp.experts.gate_up_proj_blocks"));
  BrokenModel more_experts("gpt_oss_mxfp4");
  more_experts.edit_config([](auto& c) { c["num_local_experts"] = 9; });
  EXPECT_THAT(more_experts.load_error(), HasSubstr("model.layers.0.mlp.router.weight"));
  BrokenModel yarn("gpt_oss");
  yarn.edit_config([](auto& c) { c["rope_parameters"].erase("original_max_position_embeddings"); });
  EXPECT_THAT(yarn.load_error(), HasSubstr("original_max_position_embeddings"));
}

TEST(ModelLoadErrors, GemmaFieldsThatDisagreeWithTheWeightsOrEachOther) {
  BrokenModel short_types("gemma3");
  short_types.edit_config([](auto& c) { c["layer_types"].erase(0); });
  EXPECT_THAT(short_types.load_error(), HasSubstr("layer_types must list one type for each of the 7 layers"));
  BrokenModel wider_heads("gemma3");
  wider_heads.edit_config([](auto& c) { c["head_dim"] = 32; });
  EXPECT_THAT(wider_heads.load_error(), HasSubstr("model.layers.0.self_attn.q_proj.weight"));
  BrokenModel negative_window("gemma2");
  negative_window.edit_config([](auto& c) { c["sliding_window"] = -4; });
  EXPECT_THAT(negative_window.load_error(), HasSubstr("sliding_window"));
  BrokenModel text_cap("gemma2");
  text_cap.edit_config([](auto& c) { c["final_logit_softcapping"] = "30"; });
  EXPECT_THAT(text_cap.load_error(), HasSubstr("'final_logit_softcapping' must be a number"));
}

TEST(ModelLoadErrors, MoreLayersThanTheFileHas) {
  BrokenModel m("gpt2");
  m.edit_config([](auto& c) { c["n_layer"] = 3; });
  EXPECT_THAT(m.load_error(), HasSubstr("h.2.ln_1.weight"));
}

TEST(ModelLoadErrors, UntiedModelWithoutLmHead) {
  BrokenModel m("mistral");
  m.edit_config([](auto& c) { c["tie_word_embeddings"] = false; });
  EXPECT_THAT(m.load_error(), HasSubstr("lm_head.weight"));
}

TEST(ModelLoadErrors, TruncatedWeightsFile) {
  BrokenModel m("llama");
  const std::string bytes = m.dir().read("model.safetensors");
  m.dir().write("model.safetensors", bytes.substr(0, bytes.size() / 2));
  EXPECT_THAT(m.load_error(), HasSubstr("model.safetensors"));
}

TEST(ModelLoadErrors, HeaderLengthLargerThanFile) {
  BrokenModel m("llama");
  std::string bytes = m.dir().read("model.safetensors");
  bytes[6] = '\x7f';  // header length now ~2^55
  m.dir().write("model.safetensors", bytes);
  EXPECT_THAT(m.load_error(), HasSubstr("model.safetensors"));
}

TEST(ModelLoadErrors, MissingShard) {
  BrokenModel m("mistral");
  fs::remove(m.path() / "model-00002-of-00004.safetensors");
  EXPECT_THAT(m.load_error(), HasSubstr("model-00002-of-00004.safetensors"));
}

// Not an error: an id the model can never produce ends nothing, so it is dropped (with a
// warning), as tiny models keeping GPT-2's eos id 50256 need.
TEST(ModelLoadErrors, EosIdOutsideVocabularyIsIgnored) {
  BrokenModel m("llama");
  m.dir().write("generation_config.json", R"({"eos_token_id": [2, 100000]})");
  EXPECT_EQ(m.load_error(), "no error");
  EXPECT_EQ(Model::load(m.path())->config.eos_token_ids, std::vector<int32_t>{2});
}

}  // namespace
}  // namespace tokenmill
