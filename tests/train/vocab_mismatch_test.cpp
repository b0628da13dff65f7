// Models whose ids and tokenizer disagree at the edges still run: an eos id outside the
// vocabulary (tiny models keep GPT-2's 50256) is ignored with a warning, and a model with more
// embedding rows than its tokenizer has tokens (Qwen2.5 pads its vocabulary) never generates
// an id the tokenizer cannot decode, in `generate` nor in a training run's samples.
#include <gtest/gtest.h>

#include <string>

#include "core/json_file.h"
#include "model/hf_export.h"
#include "model/model_config.h"
#include "support/run_command.h"
#include "support/temp_dir.h"
#include "train/parameters.h"
#include "train/tiny_run.h"
#include "train/trainer.h"

namespace tokenmill {
namespace {

using testing::run_tokenmill;
using testing::TempDir;

// dir/name: a random model of `vocab` embedding rows whose config says eos_token_id `eos`,
// with the chat fixture's 512-token tokenizer.
std::filesystem::path make_model(const TempDir& dir, const std::string& name, int64_t vocab, int32_t eos) {
  nlohmann::json config_json = scratch_llama_config(vocab, 1, 16, 2, 1, 32, 128, 2);
  config_json["eos_token_id"] = eos;
  const ModelConfig config = parse_model_config(config_json, name);
  ParameterSet params(config);
  params.init_gpt2(11);
  const auto out = dir.path() / name;
  export_hf_model(config, config_json, params.weights(), DType::F32, out);
  std::filesystem::remove(out / "generation_config.json");
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
    std::filesystem::copy_file(testing::kTinyRunModel / file, out / file);
  return out;
}

TEST(VocabMismatch, AnEosIdOutsideTheVocabularyIsIgnoredWithAWarning) {
  const TempDir dir;
  const auto model = make_model(dir, "eos_50256", 512, 50256);
  EXPECT_TRUE(load_model_config(model).eos_token_ids.empty());
  const auto r = run_tokenmill("generate -m " + model.string() + " -p Speak -n 4 --seed 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ignoring eos_token_id 50256"), std::string::npos) << r.output;
  // The same id in generation_config.json, which the tokenizer reads too.
  write_json_file(model / "generation_config.json", {{"eos_token_id", {2, 50256}}});
  const auto g = run_tokenmill("generate -m " + model.string() + " -p Speak -n 4 --seed 1");
  EXPECT_EQ(g.exit_code, 0) << g.output;
  EXPECT_EQ(load_model_config(model).eos_token_ids, std::vector<int32_t>{2});
}

TEST(VocabMismatch, IdsBeyondTheTokenizerAreNeverGenerated) {
  const TempDir dir;
  // 88 of 600 ids have no token: a near-uniform draw of 64 tokens picks one almost surely.
  const auto model = make_model(dir, "padded", 600, 2);
  const auto r = run_tokenmill("generate -m " + model.string() +
                               " -p Speak -n 64 --temperature 5 --seed 1 --ignore-eos");
  EXPECT_EQ(r.exit_code, 0) << r.output;

  const TrainOptions data = testing::tiny_run_options(dir);
  const auto trained = run_tokenmill("-t 1 train --data " + data.data_dir.string() + " --from " +
                                     model.string() + " --out " + (dir.path() / "run").string() +
                                     " --batch 2 --seq-len 16 --steps 1 --eval-every 0 --sample-tokens 64");
  EXPECT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find("sample at step 1:\n"), std::string::npos) << trained.output;
}

}  // namespace
}  // namespace tokenmill
