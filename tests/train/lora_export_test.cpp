// LoRA export against Hugging Face PEFT: for the llama and gpt2 fixtures, an adapter with
// closed-form values (the formula of tests/fixtures/make_lora_fixtures.py) exports as the
// very tensors and config values PEFT saved for it (tests/fixtures/lora/<name>/), and the
// merged model's logits equal PeftModel's. Then `tokenmill export` of a LoRA run, merged and
// as an adapter, and its refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/json_file.h"
#include "core/mapped_file.h"
#include "formats/safetensors.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/transformer.h"
#include "support/expect_error.h"
#include "support/run_command.h"
#include "support/temp_dir.h"
#include "train/lora_export.h"
#include "train/lora_parameters.h"
#include "train/prepare.h"
#include "train/trainer.h"

namespace tokenmill {
namespace {

using testing::run_tokenmill;
using testing::TempDir;

const std::filesystem::path kFixtures = std::filesystem::path(TOKENMILL_FIXTURES_DIR);

// The script's a_value / b_value.
void fill_formula(const ModelConfig& config, LoraParameters& adapter) {
  for (int64_t l = 0; l < config.num_hidden_layers; ++l)
    for (const LoraTarget t : adapter.lora().targets) {
      const LoraLinear& ad = adapter.weights().at(l, t);
      const auto ti = static_cast<double>(t), ld = static_cast<double>(l);
      const int64_t rank = ad.a.dim(0), in = ad.a.dim(1), out = ad.b.dim(0);
      for (int64_t k = 0; k < rank; ++k)
        for (int64_t i = 0; i < in; ++i)
          ad.a.as<float>()[k * in + i] =
              static_cast<float>(0.2 * std::sin(0.7 + 1.3 * static_cast<double>(k) +
                                                0.37 * static_cast<double>(i) + 0.11 * ld + 0.23 * ti));
      for (int64_t o = 0; o < out; ++o)
        for (int64_t k = 0; k < rank; ++k)
          ad.b.as<float>()[o * rank + k] =
              static_cast<float>(0.2 * std::cos(0.3 + 0.9 * static_cast<double>(k) +
                                                0.41 * static_cast<double>(o) + 0.17 * ld + 0.29 * ti));
    }
}

// name -> (shape, f32 values) of a safetensors file.
std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> read_tensors(
    const std::filesystem::path& path) {
  const MappedFile file(path);
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> out;
  for (const SafetensorsEntry& e : parse_safetensors(file.bytes(), path.string())) {
    EXPECT_EQ(e.dtype_name, "F32") << e.name;
    std::vector<float> values(e.nbytes / sizeof(float));
    std::memcpy(values.data(), file.bytes().data() + e.offset, e.nbytes);
    out[e.name] = {e.shape, values};
  }
  return out;
}

class PeftParity : public ::testing::TestWithParam<std::string> {};

TEST_P(PeftParity, ExportedAdapterIsPeftsAndMergedLogitsArePefts) {
  const std::filesystem::path reference = kFixtures / "lora" / GetParam();
  const nlohmann::json expected = read_json_file(reference / "expected.json");
  const auto model = Model::load(kFixtures / "hf" / GetParam());
  const LoraConfig lora{expected["rank"].get<int64_t>(), expected["alpha"].get<double>(),
                        parse_lora_targets(expected["targets"].get<std::string>())};
  LoraParameters adapter(model->config, lora);
  fill_formula(model->config, adapter);
  const TempDir dir;
  const char* keep = std::getenv("TOKENMILL_KEEP_LORA_EXPORT");  // for make_lora_fixtures.py --check
  const std::filesystem::path out =
      keep != nullptr ? std::filesystem::path(keep) / GetParam() : dir.path() / "adapter";
  export_peft_adapter(model->config, lora, adapter.weights(), "base", DType::F32, out);

  // The same tensors, bit for bit, under the same names and shapes.
  const auto ours = read_tensors(out / "adapter_model.safetensors");
  const auto peft = read_tensors(reference / "adapter_model.safetensors");
  ASSERT_EQ(ours.size(), peft.size());
  for (const auto& [name, tensor] : peft) {
    ASSERT_TRUE(ours.contains(name)) << name;
    EXPECT_EQ(ours.at(name).first, tensor.first) << name;
    EXPECT_EQ(ours.at(name).second, tensor.second) << name;
  }
  // The config values PEFT reads.
  const nlohmann::json our_config = read_json_file(out / "adapter_config.json");
  const nlohmann::json peft_config = read_json_file(reference / "adapter_config.json");
  for (const char* key :
       {"peft_type", "task_type", "r", "lora_alpha", "lora_dropout", "bias", "fan_in_fan_out", "rank_pattern",
        "alpha_pattern", "use_rslora", "use_dora", "init_lora_weights"})
    EXPECT_EQ(our_config.at(key), peft_config.at(key)) << key;
  const auto modules = [](const nlohmann::json& j) { return j.get<std::set<std::string>>(); };
  EXPECT_EQ(modules(our_config["target_modules"]), modules(peft_config["target_modules"]));
  EXPECT_EQ(our_config["base_model_name_or_path"], "base");

  // PeftModel's logits from our merged weights.
  Model merged;
  merged.config = model->config;
  merged.weights = merge_lora(model->config, model->weights, adapter.weights());
  auto backend = make_cpu_backend();
  Transformer tf(merged, *backend, 16);
  const auto ids = expected["ids"].get<std::vector<int32_t>>();
  std::vector<float> logits(ids.size() * static_cast<size_t>(model->config.vocab_size));
  tf.forward_all(ids, logits);
  const auto want = expected["logits"].get<std::vector<float>>();
  ASSERT_EQ(logits.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(logits[i], want[i], 1e-4f * (1.0f + std::fabs(want[i]))) << i;
}

INSTANTIATE_TEST_SUITE_P(Models, PeftParity, ::testing::Values("llama", "gpt2"));

// PEFT names a fused projection's adapter by the fused module: not written yet for Phi-3,
// refused before anything is written (the merged export works).
// Gemma 3 4B+ (Gemma3ForConditionalGeneration): the adapter names the language model's modules
// where transformers' module tree keeps them, and its target_modules expression matches those
// and not the vision tower's q_proj (PEFT loaded such an export on the multimodal fixture:
// 21 adapted modules, none in the vision tower, logits within 2.5e-5 of the merged export's).
TEST(LoraExport, AMultimodalGemma3AdapterNamesTheLanguageModelOnly) {
  const auto model = Model::load(kFixtures / "hf" / "gemma3_vision");
  const LoraConfig lora{2, 4.0, parse_lora_targets("q,v,down")};
  LoraParameters adapter(model->config, lora);
  fill_formula(model->config, adapter);
  const TempDir dir;
  export_peft_adapter(model->config, lora, adapter.weights(), "base", DType::F32, dir.path());
  const auto tensors = read_tensors(dir.path() / "adapter_model.safetensors");
  EXPECT_EQ(tensors.size(), 3u * 3u * 2u);  // 3 layers x 3 targets x (A, B)
  EXPECT_TRUE(tensors.contains("base_model.model.model.language_model.layers.2.mlp.down_proj.lora_B.weight"));
  const std::string targets = read_json_file(dir.path() / "adapter_config.json")["target_modules"];
  EXPECT_EQ(
      targets,
      "model\\.language_model\\.layers\\.\\d+\\.(self_attn\\.q_proj|self_attn\\.v_proj|mlp\\.down_proj)");
}

TEST(LoraExport, AnAdapterOfFusedProjectionsIsRefusedBeforeWriting) {
  const auto model = Model::load(std::string(TOKENMILL_FIXTURES_DIR) + "/hf/phi3");
  const LoraConfig lora{4, 8.0, parse_lora_targets("q,v")};
  const LoraParameters adapter(model->config, lora);
  const testing::TempDir dir;
  testing::expect_error(
      [&] {
        export_peft_adapter(model->config, lora, adapter.weights(), "base", DType::F32, dir.path() / "a");
      },
      {"Phi3ForCausalLM", "qkv_proj", "--lora merged"});
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "a"));
}

TEST(LoraExportCommand, ExportsALoraRunMergedAndAsAnAdapter) {
  const TempDir dir;
  const std::filesystem::path base = kFixtures / "hf" / "smollm_chat";
  std::string text;
  for (int i = 0; i < 20; ++i) text += "Speak, speak. You are all resolved rather to die than to famish?\n";
  PrepareOptions p;
  p.inputs = {dir.write("corpus.txt", text)};
  p.out_dir = dir.path() / "data";
  prepare_dataset(Tokenizer::from_model_dir(base), p);
  TrainOptions o;
  o.data_dir = p.out_dir;
  o.run_dir = dir.path() / "run";
  o.from_model = base;
  o.lora = {2, 4.0, parse_lora_targets("q,v")};
  o.batch = 2;
  o.seq_len = 16;
  o.steps = 3;
  o.eval_every = 0;
  o.schedule.max_lr = 1e-2;
  auto backend = make_cpu_backend();
  train(o, *backend, {});

  const std::string run = o.run_dir.string(), merged = (dir.path() / "merged").string(),
                    adapter = (dir.path() / "adapter").string();
  const auto m = run_tokenmill("export " + run + " --out " + merged + " --lora merged");
  ASSERT_EQ(m.exit_code, 0) << m.output;
  const auto a = run_tokenmill("export " + run + " --out " + adapter + " --lora adapter");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("PeftModel.from_pretrained"), std::string::npos) << a.output;

  // Merged: the untargeted tensors are the base's, bit for bit; q and v moved.
  const auto original = SafetensorsArchive::open(base);
  const auto exported = SafetensorsArchive::open(merged);
  int changed = 0;
  for (const std::string& name : original.names()) {
    const StoredTensor x = *original.find(name), y = *exported.find(name);
    ASSERT_EQ(x.entry->nbytes, y.entry->nbytes) << name;
    const bool same = std::memcmp(x.data, y.data, x.entry->nbytes) == 0;
    const bool targeted =
        name.find("q_proj") != std::string::npos || name.find("v_proj") != std::string::npos;
    EXPECT_EQ(same, !targeted) << name;
    changed += same ? 0 : 1;
  }
  EXPECT_EQ(changed, 4);  // 2 layers x {q, v}
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(merged) / "tokenizer.json"));
  const auto generated = run_tokenmill("generate -m " + merged + " -p \"Speak\" -n 4 --temperature 0");
  EXPECT_EQ(generated.exit_code, 0) << generated.output;

  // Adapter: PEFT's names, shapes and config.
  const auto tensors = read_tensors(std::filesystem::path(adapter) / "adapter_model.safetensors");
  EXPECT_EQ(tensors.size(), 8u);
  EXPECT_EQ(tensors.at("base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight").first,
            (std::vector<int64_t>{32, 2}));
  EXPECT_EQ(tensors.at("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight").first,
            (std::vector<int64_t>{2, 64}));
  const nlohmann::json config = read_json_file(std::filesystem::path(adapter) / "adapter_config.json");
  EXPECT_EQ(config["target_modules"], (nlohmann::json{"q_proj", "v_proj"}));
  EXPECT_EQ(config["lora_alpha"], 4.0);
  EXPECT_EQ(config["base_model_name_or_path"], std::filesystem::absolute(base).lexically_normal().string());

  // A full run has no adapter to export.
  o.lora = {};
  o.run_dir = dir.path() / "full";
  o.steps = 1;
  train(o, *backend, {});
  const auto refused =
      run_tokenmill("export " + o.run_dir.string() + " --out " + adapter + " --lora adapter");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.output.find("not a LoRA adapter"), std::string::npos) << refused.output;
  const auto bad_form = run_tokenmill("export " + run + " --out " + adapter + " --lora both");
  EXPECT_NE(bad_form.output.find("--lora must be merged or adapter"), std::string::npos) << bad_form.output;
}

}  // namespace
}  // namespace tokenmill
