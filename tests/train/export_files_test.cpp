// What `export` writes beside the weights: one dtype in both of config.json's dtype keys, the
// source model's own generation_config.json, the chat template (so `prepare` takes the
// exported model's chat data), and nothing at all when the run's tokenizer is missing.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "backend/backend.h"
#include "core/json_file.h"
#include "model/hf_export.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"
#include "tokenizer/tokenizer.h"
#include "train/export.h"
#include "train/prepare.h"
#include "train/tiny_run.h"
#include "train/trainer.h"

namespace tokenmill {
namespace {

using testing::expect_error;
using testing::TempDir;

class ExportFiles : public ::testing::Test {
 protected:
  // dir_/source: the chat fixture as transformers 5 saves it (the chat template in
  // chat_template.jinja, "dtype" in config.json) with generation settings of its own.
  void SetUp() override {
    source_ = dir_.path() / "source";
    std::filesystem::copy(testing::kTinyRunModel, source_);
    nlohmann::json tokenizer_config = read_json_file(source_ / "tokenizer_config.json");
    std::ofstream(source_ / "chat_template.jinja") << tokenizer_config["chat_template"].get<std::string>();
    tokenizer_config.erase("chat_template");
    write_json_file(source_ / "tokenizer_config.json", tokenizer_config);
    generation_ = {{"bos_token_id", 1}, {"eos_token_id", {2, 5}}, {"temperature", 0.7}, {"top_p", 0.9}};
    write_json_file(source_ / "generation_config.json", generation_);
    ASSERT_EQ(read_json_file(source_ / "config.json")["dtype"], "float32");
  }
  // A two-step fine-tune of dir_/source into dir_/run (checkpoints at both steps); returns
  // its newest checkpoint.
  std::filesystem::path fine_tune() {
    TrainOptions o = testing::tiny_run_options(dir_);
    o.from_model = source_;
    o.run_dir = dir_.path() / "run";
    o.steps = 2;
    o.eval_every = 0;
    o.checkpoint_every = 1;
    auto backend = make_cpu_backend();
    train(o, *backend, {});
    return run_checkpoint(o.run_dir);
  }

  TempDir dir_;
  std::filesystem::path source_;
  nlohmann::json generation_;
};

TEST_F(ExportFiles, CarryTheSourcesSettingsAndChatTemplate) {
  const auto out = dir_.path() / "exported";
  export_checkpoint(fine_tune(), out, DType::BF16);
  const nlohmann::json config = read_json_file(out / "config.json");
  EXPECT_EQ(config["torch_dtype"], "bfloat16");
  EXPECT_EQ(config["dtype"], "bfloat16");
  EXPECT_EQ(read_json_file(out / "generation_config.json"), generation_);
  ASSERT_TRUE(std::filesystem::is_regular_file(out / "chat_template.jinja"));
  const nlohmann::json record = {
      {"messages",
       {{{"role", "user"}, {"content", "Hello?"}}, {{"role", "assistant"}, {"content", "Speak, speak."}}}}};
  PrepareOptions p;
  p.inputs = {dir_.write("chat.jsonl", record.dump() + "\n" + record.dump() + "\n")};
  p.out_dir = dir_.path() / "chat_data";
  EXPECT_EQ(prepare_dataset(Tokenizer::from_model_dir(out), p).chat_documents, 2);
}

TEST_F(ExportFiles, AMissingTokenizerWritesNothing) {
  const auto checkpoint = fine_tune();
  std::filesystem::remove(source_ / "tokenizer.json");
  const auto out = dir_.path() / "exported";
  expect_error([&] { export_checkpoint(checkpoint, out, DType::F32); },
               {"no tokenizer.json", "nothing was written"});
  EXPECT_FALSE(std::filesystem::exists(out));
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path()))
    EXPECT_EQ(entry.path().filename().string().find(".exported"), std::string::npos) << entry.path();
}

TEST_F(ExportFiles, ARunExportsItsNewestCheckpointThatVerifies) {
  const auto newest = fine_tune();  // steps 1 and 2 checkpointed
  ASSERT_EQ(newest.filename(), "step_00000002.tmckpt");
  std::string bytes = dir_.read("run/checkpoints/step_00000002.tmckpt");
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x10);
  dir_.write("run/checkpoints/step_00000002.tmckpt", bytes);
  std::string skipped;
  const auto chosen =
      run_checkpoint(dir_.path() / "run", [&](const std::filesystem::path& p, const std::string& why) {
        skipped = p.filename().string() + ": " + why;
      });
  EXPECT_EQ(chosen.filename(), "step_00000001.tmckpt");
  EXPECT_NE(skipped.find("step_00000002.tmckpt: "), std::string::npos) << skipped;
  EXPECT_NE(skipped.find("does not match its hash"), std::string::npos) << skipped;
}

TEST_F(ExportFiles, AnExistingDirectoryGetsTheNewFilesAndKeepsItsOthers) {
  const auto out = dir_.path() / "exported";
  std::filesystem::create_directories(out);
  std::ofstream(out / "README.md") << "notes\n";
  std::ofstream(out / "config.json") << "{}";
  export_checkpoint(fine_tune(), out, DType::F32);
  EXPECT_TRUE(std::filesystem::is_regular_file(out / "README.md"));
  EXPECT_EQ(read_json_file(out / "config.json")["dtype"], "float32");
  EXPECT_TRUE(std::filesystem::is_regular_file(out / "model.safetensors"));
}

}  // namespace
}  // namespace tokenmill
