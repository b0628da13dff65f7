// Export: a model written as a Hugging Face directory loads back (through the strict
// safetensors reader) with the same logits, for the Llama, GPT-2 (Conv1D + fused c_attn) and
// Qwen2 layouts and every export dtype; a trained run exports with its tokenizer.
#include <gtest/gtest.h>

#include <vector>

#include "backend/backend.h"
#include "core/json_file.h"
#include "model/hf_export.h"
#include "model/model.h"
#include "model/transformer.h"
#include "support/expect_error.h"
#include "support/run_command.h"
#include "support/temp_dir.h"
#include "train/parameters.h"

namespace tokenmill {
namespace {

using testing::TempDir;

const std::filesystem::path kFixtures = std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "hf";

// The same f32 KV cache for every file, whatever its weights' default: only the weights differ.
std::vector<float> logits(const Model& model, Backend& backend) {
  Transformer tf(model, backend, 16, Transformer::kDefaultChunkTokens, DType::F32);
  const std::vector<int32_t> ids = {5, 17, 42, 3, 99, 7};
  std::vector<float> out(ids.size() * static_cast<size_t>(model.config.vocab_size));
  tf.forward_all(ids, out);
  return out;
}

class ExportRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(ExportRoundTrip, ReloadsWithTheSameLogits) {
  const TempDir dir;
  auto backend = make_cpu_backend();
  const auto original = Model::load(kFixtures / GetParam());
  ParameterSet params(original->config);  // the f32 master copy a training run exports
  params.load(original->weights);
  const nlohmann::json config_json = read_json_file(kFixtures / GetParam() / "config.json");
  const std::vector<float> expected = logits(*original, *backend);
  for (const DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    const auto out = dir.path() / std::string(dtype_name(dtype));
    export_hf_model(original->config, config_json, params.weights(), dtype, out);
    const auto reloaded = Model::load(out);
    const std::vector<float> got = logits(*reloaded, *backend);
    ASSERT_EQ(got.size(), expected.size());
    // f32 holds the original values exactly; bf16 / f16 round each weight once.
    const float tolerance = dtype == DType::F32 ? 1e-5f : dtype == DType::F16 ? 2e-2f : 1.5e-1f;
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], expected[i], tolerance * (1.0f + std::fabs(expected[i])))
          << dtype_name(dtype) << " " << i;
    EXPECT_EQ(read_json_file(out / "config.json")["torch_dtype"], dtype == DType::F32    ? "float32"
                                                                  : dtype == DType::BF16 ? "bfloat16"
                                                                                         : "float16");
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, ExportRoundTrip,
                         ::testing::Values("llama", "gpt2", "qwen2", "mistral", "qwen3", "phi3", "olmo2",
                                           "gemma2", "gemma3", "gemma3_vision", "mixtral", "qwen3_moe"));

// Gemma 3 4B+ checkpoints hold a vision tower beside the language model: the export is the
// language model alone, as the text-only Gemma3ForCausalLM (its config from text_config,
// with the defaults the Hub's file leaves out, and the outer file's token ids).
TEST(ExportCommand, AMultimodalGemma3ExportsItsLanguageModelAsText) {
  const TempDir dir;
  const auto original = Model::load(kFixtures / "gemma3_vision");
  ParameterSet params(original->config);
  params.load(original->weights);
  export_hf_model(original->config, read_json_file(kFixtures / "gemma3_vision" / "config.json"),
                  params.weights(), DType::F32, dir.path());
  const nlohmann::json written = read_json_file(dir.path() / "config.json");
  EXPECT_EQ(written["architectures"], nlohmann::json::array({"Gemma3ForCausalLM"}));
  EXPECT_EQ(written["model_type"], "gemma3_text");
  EXPECT_EQ(written["num_attention_heads"], 8);  // a default the source's text_config left out
  EXPECT_FALSE(written.contains("vision_config"));
  const auto reloaded = Model::load(dir.path());
  EXPECT_EQ(reloaded->config.architecture, "Gemma3ForCausalLM");
  EXPECT_EQ(reloaded->config.num_key_value_heads, 4);
}

TEST(ExportCommand, TrainedRunExportsAndGenerates) {
  const TempDir dir;
  std::string text;
  for (int i = 0; i < 20; ++i) text += "Speak, speak. You are all resolved rather to die than to famish?\n";
  const auto corpus = dir.write("corpus.txt", text);
  const std::string data = (dir.path() / "data").string(), run = (dir.path() / "run").string(),
                    out = (dir.path() / "hf").string();
  ASSERT_EQ(testing::run_tokenmill("prepare -m " + (kFixtures / "smollm_chat").string() + " --input " +
                                   corpus.string() + " --out " + data)
                .exit_code,
            0);
  ASSERT_EQ(testing::run_tokenmill(
                "-t 1 train --data " + data + " --out " + run +
                " --layers 1 --hidden 32 --heads 2 --batch 2 --seq-len 16 --steps 2 --eval-every 0"
                " --sample-tokens 4")
                .exit_code,
            0);
  const auto exported = testing::run_tokenmill("export --run " + run + " --out " + out + " --dtype bf16");
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "hf" / "tokenizer.json"));
  const auto generated = testing::run_tokenmill("generate -m " + out + " -p \"Speak\" -n 4 --temperature 0");
  EXPECT_EQ(generated.exit_code, 0) << generated.output;
  const auto missing =
      testing::run_tokenmill("export --run " + (dir.path() / "nothing").string() + " --out " + out);
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("no checkpoint"), std::string::npos) << missing.output;
}

}  // namespace
}  // namespace tokenmill
