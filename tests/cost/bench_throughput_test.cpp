// Reading throughputs from a bench.json: which entries are chosen, and what the user is told.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cost/bench_sample.h"
#include "cost/bench_throughput.h"
#include "cost/cost_request.h"
#include "support/temp_dir.h"

namespace tokenmill {
namespace {

using ::testing::HasSubstr;
using testing::sample_bench;
using testing::TempDir;

TEST(BenchThroughput, DecodeAtTheLargestBatch) {
  const TempDir dir;
  const auto path = dir.write("bench.json", sample_bench().dump());
  const BenchThroughputs b = read_bench_throughputs(path, "");
  EXPECT_EQ(b.device_name, "AMD EPYC 9R14 96-Core Processor");
  ASSERT_EQ(b.phases.size(), 1u);  // no "train" entry in the file
  EXPECT_EQ(b.phases[0].phase, "decode");
  EXPECT_EQ(b.phases[0].batch, 8);
  EXPECT_DOUBLE_EQ(b.phases[0].tokens_per_s, 900.0);
  EXPECT_THAT(b.phases[0].source, HasSubstr("phases[2]"));
}

TEST(BenchThroughput, TrainingFirstThenInference) {
  const TempDir dir;
  auto bench = sample_bench();
  bench["phases"].push_back(testing::phase_entry("train", 4, 350.0));
  const BenchThroughputs b = read_bench_throughputs(dir.write("bench.json", bench.dump()), "");
  ASSERT_EQ(b.phases.size(), 2u);
  EXPECT_EQ(b.phases[0].phase, "train");
  EXPECT_DOUBLE_EQ(b.phases[0].tokens_per_s, 350.0);
  EXPECT_EQ(b.phases[1].phase, "decode");
}

TEST(BenchThroughput, PhaseChosenByName) {
  const TempDir dir;
  const BenchThroughputs b =
      read_bench_throughputs(dir.write("bench.json", sample_bench().dump()), "prefill");
  ASSERT_EQ(b.phases.size(), 1u);
  EXPECT_DOUBLE_EQ(b.phases[0].tokens_per_s, 1312.0);
}

TEST(BenchThroughput, MatchingDeviceIsNamedAndGpusScaleTheThroughput) {
  const TempDir dir;
  CostRequest r;
  r.bench_path = dir.write("bench.json", sample_bench("NVIDIA H100 80GB HBM3").dump()).string();
  r.gpu_hour_price = 3.0;
  r.gpus = 4;
  const CostInputs in = resolve_cost_request(r);
  ASSERT_EQ(in.throughputs.size(), 1u);
  EXPECT_DOUBLE_EQ(in.throughputs[0].tokens_per_s, 3600.0);  // 900 x 4 GPUs
  ASSERT_GE(in.notes.size(), 2u);
  EXPECT_THAT(in.notes[0], HasSubstr("that is the H100 SXM preset (--preset h100-sxm)"));
  EXPECT_THAT(in.notes[1], HasSubstr("linear scaling"));
}

TEST(BenchThroughput, PresetOfAnotherDeviceIsSaid) {
  const TempDir dir;
  CostRequest r;
  r.bench_path = dir.write("bench.json", sample_bench().dump()).string();
  r.preset = "h200";
  const CostInputs in = resolve_cost_request(r);
  EXPECT_THAT(in.notes[0], HasSubstr("not on the H200 preset's GPU"));
}

}  // namespace
}  // namespace tokenmill
