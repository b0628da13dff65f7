// A dataset and a run keep working from any folder: `prepare` in one working directory with
// relative paths, `train` from a second, `export` from a third (the paths the dataset and the
// run record are absolute).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/run_command.h"
#include "support/temp_dir.h"

namespace tokenmill {
namespace {

using testing::run_tokenmill;
using testing::TempDir;

const std::filesystem::path kModelDir = std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "hf" / "smollm_chat";

// Runs the binary with `dir` as its working directory.
testing::CommandResult run_in(const std::filesystem::path& dir, const std::string& args) {
  const std::filesystem::path previous = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  testing::CommandResult r = run_tokenmill(args);
  std::filesystem::current_path(previous);
  return r;
}

TEST(RunPaths, PrepareTrainAndExportWorkFromThreeFolders) {
  const TempDir dir;
  for (const char* folder : {"prep", "prep/tok", "train", "export"})
    std::filesystem::create_directories(dir.path() / folder);
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
    std::filesystem::copy_file(kModelDir / file, dir.path() / "prep/tok" / file);
  std::string text;
  for (int i = 0; i < 30; ++i) text += "Speak, speak. You are all resolved rather to die than to famish?\n";
  dir.write("prep/corpus.txt", text);

  const auto prepared = run_in(dir.path() / "prep", "prepare -m tok --input corpus.txt --out data");
  ASSERT_EQ(prepared.exit_code, 0) << prepared.output;
  const auto trained = run_in(dir.path() / "train",
                              "-t 1 train --data ../prep/data --out run --layers 1 --hidden 16 --heads 2 "
                              "--batch 2 --seq-len 16 --steps 2 --eval-every 0 --sample-tokens 4");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const auto exported = run_in(dir.path() / "export", "export ../train/run --out model");
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_TRUE(std::filesystem::is_regular_file(dir.path() / "export/model/tokenizer.json"));
  EXPECT_TRUE(std::filesystem::is_regular_file(dir.path() / "export/model/model.safetensors"));
}

}  // namespace
}  // namespace tokenmill
