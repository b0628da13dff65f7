// `tokenmill prepare` + `tokenmill train` as a user runs them: progress, evaluation, a
// sample and the summary; --recompute-activations changes no printed loss; --device picks
// the backend (a GPU that cannot be used is a clear error, auto falls back to the CPU with
// one note); then clear errors for missing data and bad flags.
#include <gtest/gtest.h>

#include <string>

#include "backend/cuda_availability.h"
#include "support/run_command.h"
#include "support/temp_dir.h"

namespace tokenmill {
namespace {

using testing::run_tokenmill;
using testing::TempDir;

const std::string kModelDir = std::string(TOKENMILL_FIXTURES_DIR) + "/hf/smollm_chat";

// dir/data: a small corpus prepared with the fixture's tokenizer.
std::string prepare_data(const TempDir& dir) {
  std::string text;
  for (int i = 0; i < 30; ++i) text += "Speak, speak. You are all resolved rather to die than to famish?\n";
  const auto corpus = dir.write("corpus.txt", text);
  const std::string data = (dir.path() / "data").string();
  EXPECT_EQ(
      run_tokenmill("prepare -m " + kModelDir + " --input " + corpus.string() + " --out " + data).exit_code,
      0);
  return data;
}

// `tokenmill train` of a tiny model on `data` into dir/run, plus `flags`.
testing::CommandResult train_tiny(const TempDir& dir, const std::string& data, const std::string& flags) {
  return run_tokenmill("-t 1 train --data " + data + " --out " + (dir.path() / "run").string() +
                       " --layers 2 --hidden 32 --heads 2 --batch 2 --seq-len 16 --steps 3 --eval-every 2"
                       " --eval-batches 1 --sample-tokens 8 --lr 1e-2 " +
                       flags);
}

// The text of `output` from `from` to the end of its line, or to its timing (the " | "
// after "grad norm") in a step's line.
std::string line_from(const std::string& output, const std::string& from) {
  const size_t at = output.find(from);
  if (at == std::string::npos) return {};
  const std::string line = output.substr(at, output.find('\n', at) - at);
  const size_t grad_norm = line.find("grad norm");
  return grad_norm == std::string::npos ? line : line.substr(0, line.find(" | ", grad_norm));
}

TEST(TrainCommand, TrainsATinyModelFromScratch) {
  const TempDir dir;
  const auto r = train_tiny(dir, prepare_data(dir), "");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* part : {"step     3/3 | loss", "eval step     2 | val loss", "sample at step 3",
                           "== summary ==", "val loss at end", "step_00000003.tmckpt"})
    EXPECT_NE(r.output.find(part), std::string::npos) << "missing: " << part << "\n" << r.output;
}

TEST(TrainCommand, RecomputedActivationsGiveTheSameLosses) {
  const TempDir kept_dir, recomputed_dir;
  const auto kept = train_tiny(kept_dir, prepare_data(kept_dir), "");
  const auto recomputed = train_tiny(recomputed_dir, prepare_data(recomputed_dir), "--recompute-activations");
  ASSERT_EQ(recomputed.exit_code, 0) << recomputed.output;
  EXPECT_NE(recomputed.output.find("(recomputed layer by layer in the backward)"), std::string::npos)
      << recomputed.output;
  for (const char* step : {"step     1/3 | loss", "step     3/3 | loss", "val loss at end"}) {
    const std::string expected = line_from(kept.output, step);
    ASSERT_FALSE(expected.empty()) << step << "\n" << kept.output;
    EXPECT_EQ(line_from(recomputed.output, step), expected);
  }
}

// --router-aux-loss adds the load-balancing loss to a mixture of experts' training loss (the
// first step's loss grows by about coefficient x k, the loss of a balanced router), and is
// refused for a model without a router.
TEST(TrainCommand, RouterAuxLossBalancesAMixtureOfExpertsOnly) {
  const TempDir dir;
  const std::string mixtral = std::string(TOKENMILL_FIXTURES_DIR) + "/hf/mixtral";
  std::string text;
  for (int i = 0; i < 20; ++i) text += "Speak, speak. You are all resolved rather to die than to famish?\n";
  const auto corpus = dir.write("corpus.txt", text);
  const std::string data = (dir.path() / "data").string();
  ASSERT_EQ(
      run_tokenmill("prepare -m " + mixtral + " --input " + corpus.string() + " --out " + data).exit_code, 0);
  const auto first_loss = [&](const std::string& run, const std::string& flags) {
    const auto r = run_tokenmill("-t 1 train --data " + data + " --from " + mixtral + " --out " +
                                 (dir.path() / run).string() + " --batch 2 --seq-len 16 --steps 1 " + flags);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const std::string line = line_from(r.output, "step     1/1 | loss");
    return line.empty() ? 0.0 : std::stod(line.substr(std::string("step     1/1 | loss").size()));
  };
  const double plain = first_loss("plain", ""), balanced = first_loss("balanced", "--router-aux-loss 0.5");
  EXPECT_GT(balanced - plain, 0.5 * 0.9) << plain << " -> " << balanced;  // k = 2 experts a token
  EXPECT_LT(balanced - plain, 0.5 * 2.5) << plain << " -> " << balanced;
  const auto dense = train_tiny(dir, prepare_data(dir), "--router-aux-loss 0.01");
  EXPECT_NE(dense.exit_code, 0);
  EXPECT_NE(dense.output.find("not a mixture of experts"), std::string::npos) << dense.output;
}

size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(TrainCommand, DeviceFlagChoosesTheBackend) {
  const TempDir dir;
  const std::string data = prepare_data(dir);
  const auto tpu = train_tiny(dir, data, "--device tpu");
  EXPECT_NE(tpu.exit_code, 0);
  EXPECT_NE(tpu.output.find("--device tpu: expected auto, cpu, cuda or cuda:N"), std::string::npos)
      << tpu.output;
  const auto no_such_gpu = train_tiny(dir, data, "--device cuda:4096");
  EXPECT_NE(no_such_gpu.exit_code, 0);
  EXPECT_NE(no_such_gpu.output.find("error: --device cuda:4096: "), std::string::npos) << no_such_gpu.output;
  EXPECT_EQ(no_such_gpu.output.find("step "), std::string::npos) << no_such_gpu.output;

  const auto cpu = train_tiny(dir, data, "--device cpu");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  EXPECT_EQ(cpu.output.find("note:"), std::string::npos) << cpu.output;
  const std::string why = cuda_unavailable_reason();
  if (why.empty()) GTEST_SKIP() << "a GPU is usable here: --device cuda and auto train on it";
  const auto cuda = train_tiny(dir, data, "--device cuda");
  EXPECT_NE(cuda.exit_code, 0);
  EXPECT_NE(cuda.output.find("error: --device cuda: " + why), std::string::npos) << cuda.output;
  const auto fallback = train_tiny(dir, data, "--device auto");
  ASSERT_EQ(fallback.exit_code, 0) << fallback.output;
  EXPECT_EQ(count_of(fallback.output, "note:"), 1u) << fallback.output;
  EXPECT_NE(fallback.output.find("note: running on the CPU: " + why + "\n"), std::string::npos)
      << fallback.output;
  // The fallback trains as --device cpu does.
  for (const char* step : {"step     3/3 | loss", "val loss at end"})
    EXPECT_EQ(line_from(fallback.output, step), line_from(cpu.output, step)) << step;
}

TEST(TrainCommand, PrecisionFlagChoosesTheComputeCopy) {
  const TempDir dir;
  const std::string data = prepare_data(dir);
  const auto bf16 = train_tiny(dir, data, "--precision bf16");
  EXPECT_EQ(bf16.exit_code, 0) << bf16.output;
  for (const char* part : {"bf16-weight 512^3 GEMM", "precision: bf16 matrices", "FP32 master weights"})
    EXPECT_NE(bf16.output.find(part), std::string::npos) << "missing: " << part << "\n" << bf16.output;
  const TempDir fp16_dir;
  const auto fp16 = train_tiny(fp16_dir, data, "--precision fp16 --initial-loss-scale 1024");
  EXPECT_EQ(fp16.exit_code, 0) << fp16.output;
  for (const char* part : {"dynamic loss scale from 1024", "| loss scale 1024 |"})
    EXPECT_NE(fp16.output.find(part), std::string::npos) << "missing: " << part << "\n" << fp16.output;
  const auto bad = train_tiny(fp16_dir, data, "--precision fp64");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("unknown precision 'fp64'"), std::string::npos) << bad.output;
}

TEST(TrainCommand, BadInputIsAClearError) {
  const TempDir dir;
  const auto missing =
      run_tokenmill("train --data " + (dir.path() / "nope").string() + " --out " + dir.path().string());
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("nope/meta.json"), std::string::npos) << missing.output;
  const auto bad_decay = run_tokenmill("train --data x --out y --lr-decay step");
  EXPECT_NE(bad_decay.exit_code, 0);
  const auto bad_eps = train_tiny(dir, prepare_data(dir), "--adam-eps 0");
  EXPECT_EQ(bad_eps.exit_code, 1);
  EXPECT_NE(bad_eps.output.find("--adam-eps must be a positive number"), std::string::npos) << bad_eps.output;
}

TEST(TrainCommand, HelpSaysWhenCheckpointsAreWritten) {
  const auto help = run_tokenmill("train --help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* part : {"--checkpoint-minutes", "default 10", "--adam-eps"})
    EXPECT_NE(help.output.find(part), std::string::npos) << "missing: " << part << "\n" << help.output;
}

}  // namespace
}  // namespace tokenmill
