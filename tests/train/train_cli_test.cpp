// `tokenmill prepare` + `tokenmill train` as a user runs them: progress, evaluation, a
// sample and the summary; then clear errors for missing data and bad flags.
#include <gtest/gtest.h>

#include <string>

#include "support/run_command.h"
#include "support/temp_dir.h"

namespace tokenmill {
namespace {

using testing::run_tokenmill;
using testing::TempDir;

const std::string kModelDir = std::string(TOKENMILL_FIXTURES_DIR) + "/hf/smollm_chat";

TEST(TrainCommand, TrainsATinyModelFromScratch) {
  const TempDir dir;
  std::string text;
  for (int i = 0; i < 30; ++i) text += "Speak, speak. You are all resolved rather to die than to famish?\n";
  const auto corpus = dir.write("corpus.txt", text);
  const std::string data = (dir.path() / "data").string(), run = (dir.path() / "run").string();
  ASSERT_EQ(
      run_tokenmill("prepare -m " + kModelDir + " --input " + corpus.string() + " --out " + data).exit_code,
      0);
  const auto r =
      run_tokenmill("-t 1 train --data " + data + " --out " + run +
                    " --layers 1 --hidden 32 --heads 2 --batch 2 --seq-len 16 --steps 3 --eval-every 2"
                    " --eval-batches 1 --sample-tokens 8 --lr 1e-2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* part : {"step     3/3 | loss", "eval step     2 | val loss", "sample at step 3",
                           "== summary ==", "val loss at end", "step_00000003.tmckpt"})
    EXPECT_NE(r.output.find(part), std::string::npos) << "missing: " << part << "\n" << r.output;
}

TEST(TrainCommand, BadInputIsAClearError) {
  const TempDir dir;
  const auto missing =
      run_tokenmill("train --data " + (dir.path() / "nope").string() + " --out " + dir.path().string());
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("nope/meta.json"), std::string::npos) << missing.output;
  const auto bad_decay = run_tokenmill("train --data x --out y --lr-decay step");
  EXPECT_NE(bad_decay.exit_code, 0);
}

}  // namespace
}  // namespace tokenmill
