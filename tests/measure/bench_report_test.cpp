// bench.json, the markdown report, the charts and --compare, from a BenchRun with hand
// numbers (no model run): metrics, JSON round trip, rows, well-formed SVG, peer errors.
#include <cmath>
#include <regex>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "measure/bench_charts.h"
#include "measure/bench_report.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace tokenmill {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// 200 GFLOP/s and 40 GB/s (ridge 5 FLOP/byte).
// prefill: 512 tokens in 0.5 s, 5e10 FLOPs, 1e9 bytes: 1024 tok/s, 1e11 FLOP/s (MFU 0.5),
//   50 FLOP/byte -> compute-bound, roofline fraction = MFU = 0.5.
// decode: 128 tokens in 1 s, 2.56e10 FLOPs, 1.28e10 bytes: 128 tok/s, 2 FLOP/byte ->
//   memory-bound, 12.8 GB/s of 40 = 0.32; MFU 2.56e10 / 2e11 = 0.128.
// decode at batch 4: 512 tokens in 1.6 s, 1.024e11 FLOPs, 1.6e10 bytes: 320 tok/s, 6.4 FLOP/byte
//   -> compute-bound, 6.4e10 FLOP/s = 0.32 of the peak.
// train: 512 tokens a step of 2 s, 1.5e11 FLOPs, 5.6e9 bytes: 256 tok/s, 7.5e10 FLOP/s (MFU
//   0.375), 26.8 FLOP/byte -> compute-bound.
BenchRun hand_run() {
  BenchRun run;
  run.device = {"cpu", "Test CPU <1>", 2, "avx2"};
  run.ceilings = {2e11, 4e10, 1024, 256u << 20};
  run.model = {"tiny.gguf", "LlamaForCausalLM", 1000, 4000, "q4_1"};
  run.phases = {{"prefill", 1, 512, 0.5, 5e10, 1e9},
                {"decode", 1, 128, 1.0, 2.56e10, 1.28e10},
                {"decode", 4, 512, 1.6, 1.024e11, 1.6e10},
                {"train", 1, 512, 2.0, 1.5e11, 5.6e9}};
  run.peak_memory_bytes = 123'456'789;
  run.notes = {"prompt capped from 512 to 100 tokens"};
  run.gpu_sampling = "not sampled: the run is on the CPU";
  return run;
}

// hand_run on a GPU: NVML readings for decode at batch 1 (128 tokens in 1 s) only.
BenchRun sampled_run() {
  BenchRun run = hand_run();
  run.device = {"cuda", "cuda:0 (NVIDIA H100 80GB HBM3, sm_90)", 2, ""};
  run.gpu_sampling = "sampled every 100 ms through NVML (NVIDIA H100 80GB HBM3)";
  GpuSampleSummary gpu;
  gpu.samples = 10;
  gpu.mean_gpu_utilization = 87;
  gpu.max_gpu_utilization = 99;
  gpu.mean_memory_utilization = 41;
  gpu.max_memory_utilization = 60;
  gpu.mean_power_watts = 320;
  gpu.max_power_watts = 410;
  gpu.energy_joules = 320;  // 320 W x 1 s
  gpu.joules_per_token = 2.5;
  gpu.max_memory_used_bytes = 5'000'000'000;
  gpu.mean_sm_clock_mhz = 1980;
  run.phases[1].gpu = gpu;
  return run;
}

const Comparison kPeer{"peer-bench", {{"decode", 1, 64.0}, {"prefill", 1, 2048.0}, {"decode", 8, 900.0}}};

TEST(BenchReport, PhaseMetrics) {
  const BenchRun run = hand_run();
  const PhaseMetrics prefill = phase_metrics(run.phases[0], run.ceilings);
  EXPECT_DOUBLE_EQ(prefill.tokens_per_s, 1024.0);
  EXPECT_DOUBLE_EQ(prefill.achieved_flops, 1e11);
  EXPECT_DOUBLE_EQ(prefill.mfu, 0.5);
  EXPECT_DOUBLE_EQ(prefill.intensity, 50.0);
  EXPECT_EQ(prefill.bound, "compute");
  EXPECT_DOUBLE_EQ(prefill.roofline_fraction, 0.5);
  const PhaseMetrics decode = phase_metrics(run.phases[1], run.ceilings);
  EXPECT_DOUBLE_EQ(decode.tokens_per_s, 128.0);
  EXPECT_DOUBLE_EQ(decode.bytes_per_token, 1e8);
  EXPECT_DOUBLE_EQ(decode.achieved_bandwidth, 1.28e10);
  EXPECT_EQ(decode.bound, "memory");
  EXPECT_DOUBLE_EQ(decode.roofline_fraction, 0.32);
  EXPECT_DOUBLE_EQ(decode.mfu, 0.128);
}

TEST(BenchReport, JsonFollowsTheSchemaAndRoundTrips) {
  const nlohmann::json json = bench_json(hand_run(), kPeer, "2026-12-03T04:10:00Z");
  const nlohmann::json back = nlohmann::json::parse(json.dump(2));
  EXPECT_EQ(back, json);
  EXPECT_EQ(back["schema"], "tokenmill.bench/1");
  EXPECT_EQ(back["created_utc"], "2026-12-03T04:10:00Z");
  EXPECT_EQ(back["device"]["name"], "Test CPU <1>");
  EXPECT_EQ(back["roofline"]["gemm"], "f32 1024x1024x1024");
  EXPECT_EQ(back["roofline"]["copy_bytes"], 256u << 20);
  EXPECT_EQ(back["model"]["weight_dtype"], "q4_1");
  EXPECT_EQ(back["model"]["synthetic"], false);
  ASSERT_EQ(back["phases"].size(), 4u);
  EXPECT_EQ(back["phases"][2]["batch"], 4);
  EXPECT_DOUBLE_EQ(back["phases"][2]["tokens_per_s"].get<double>(), 320.0);
  EXPECT_EQ(back["phases"][3]["phase"], "train");
  EXPECT_DOUBLE_EQ(back["phases"][3]["mfu"].get<double>(), 0.375);
  EXPECT_EQ(back["phases"][3]["bound"], "compute");
  EXPECT_EQ(back["phases"][1]["phase"], "decode");
  EXPECT_DOUBLE_EQ(back["phases"][1]["tokens_per_s"].get<double>(), 128.0);
  EXPECT_DOUBLE_EQ(back["phases"][1]["roofline_fraction"].get<double>(), 0.32);
  EXPECT_EQ(back["phases"][1]["bound"], "memory");
  EXPECT_EQ(back["peak_memory_bytes"], 123'456'789);
  EXPECT_EQ(back["gpu_sampling"], "not sampled: the run is on the CPU");
  for (const auto& phase : back["phases"]) EXPECT_TRUE(phase["gpu_samples"].is_null()) << phase;
  EXPECT_EQ(back["device"]["isa"], "avx2");
  EXPECT_EQ(back["roofline"]["bandwidth_probe"], "host read");
  // ours / peer: decode 128 / 64 = 2, prefill 1024 / 2048 = 0.5, no batch 8 here: null.
  const nlohmann::json& compare = back["compare"];
  EXPECT_EQ(compare["command"], "peer-bench");
  EXPECT_DOUBLE_EQ(compare["phases"][0]["ratio"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(compare["phases"][1]["ratio"].get<double>(), 0.5);
  EXPECT_TRUE(compare["phases"][2]["ratio"].is_null());
}

TEST(BenchReport, GpuReadingsPerPhase) {
  const nlohmann::json json = bench_json(sampled_run(), std::nullopt, utc_now());
  EXPECT_EQ(json["gpu_sampling"], "sampled every 100 ms through NVML (NVIDIA H100 80GB HBM3)");
  EXPECT_EQ(json["device"]["backend"], "cuda");
  EXPECT_TRUE(json["device"]["isa"].is_null());
  EXPECT_TRUE(json["phases"][0]["gpu_samples"].is_null());
  const nlohmann::json& gpu = json["phases"][1]["gpu_samples"];
  EXPECT_EQ(gpu["samples"], 10);
  EXPECT_DOUBLE_EQ(gpu["mean_gpu_utilization"].get<double>(), 87.0);
  EXPECT_DOUBLE_EQ(gpu["max_power_watts"].get<double>(), 410.0);
  EXPECT_DOUBLE_EQ(gpu["energy_joules"].get<double>(), 320.0);
  EXPECT_DOUBLE_EQ(gpu["joules_per_token"].get<double>(), 2.5);
  EXPECT_EQ(gpu["max_memory_used_bytes"], 5'000'000'000u);

  const std::string md = bench_markdown(sampled_run(), std::nullopt);
  EXPECT_THAT(md, HasSubstr("| GPU util % | memory util % | power W | J/token |\n"));
  EXPECT_THAT(md, HasSubstr("| memory | 32.0 % | 87 / 99 | 41 / 60 | 320 / 410 | 2.5 |\n"));
  EXPECT_THAT(md, HasSubstr("| compute | 50.0 % | - | - | - | - |\n"));  // prefill: no samples
  EXPECT_THAT(md, HasSubstr("- device: cuda:0 (NVIDIA H100 80GB HBM3, sm_90) (cuda)\n"));
  EXPECT_THAT(bench_table(sampled_run(), std::nullopt),
              HasSubstr("decode batch 1: GPU 87 % (max 99), memory 41 %, 320 W (max 410), 2.5 J/token"));
  // Without samples, no GPU columns; the reason is stated.
  const std::string cpu_md = bench_markdown(hand_run(), std::nullopt);
  EXPECT_THAT(cpu_md, Not(HasSubstr("GPU util")));
  EXPECT_THAT(cpu_md, HasSubstr("- GPU readings: not sampled: the run is on the CPU\n"));
}

TEST(BenchReport, UnmeasuredPeakMemoryIsNull) {
  BenchRun run = hand_run();
  run.peak_memory_bytes.reset();
  const nlohmann::json json = bench_json(run, std::nullopt, utc_now());
  EXPECT_TRUE(json["peak_memory_bytes"].is_null());
  EXPECT_FALSE(json.contains("compare"));
  EXPECT_TRUE(std::regex_match(json["created_utc"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
}

TEST(BenchReport, MarkdownHasARowPerPhaseTheRatiosAndTheNotes) {
  const std::string md = bench_markdown(hand_run(), kPeer);
  EXPECT_THAT(md, HasSubstr("| prefill | 1 | 512 | 0.500 | 1024.0 |"));
  EXPECT_THAT(md, HasSubstr("| decode | 1 | 128 | 1.000 | 128.0 |"));
  EXPECT_THAT(md, HasSubstr("| memory | 32.0 % |"));
  EXPECT_THAT(md, HasSubstr("| decode | 1 | 64.0 | 2.00x |"));
  EXPECT_THAT(md, HasSubstr("| decode | 8 | 900.0 | (no such phase here) |"));
  EXPECT_THAT(md, HasSubstr("| decode | 4 | 512 | 1.600 | 320.0 |"));
  EXPECT_THAT(md, HasSubstr("| train | 1 | 512 | 2.000 | 256.0 |"));
  EXPECT_THAT(md, HasSubstr("| 37.5 % |"));
  EXPECT_THAT(md, HasSubstr("decode at batch b: b sequences decoded together"));
  EXPECT_THAT(md, HasSubstr("train: one step of forward, backward and AdamW"));
  EXPECT_THAT(md, HasSubstr("prompt capped from 512 to 100 tokens"));
  const std::string table = bench_table(hand_run(), std::nullopt);
  EXPECT_THAT(table, HasSubstr("decode"));
  EXPECT_THAT(table, HasSubstr("32.0 %"));
  EXPECT_THAT(table, HasSubstr("12.8 GB/s"));
}

TEST(BenchReport, ExplainsFractionsAbove100Percent) {
  EXPECT_THAT(bench_markdown(hand_run(), std::nullopt), Not(HasSubstr("CPU caches")));
  BenchRun run = hand_run();
  run.phases[0].seconds = 0.1;  // 5e11 FLOP/s: MFU 250 %
  run.phases[1].seconds = 0.1;  // 1.28e11 bytes/s: 320 % of the 40 GB/s read
  const std::string md = bench_markdown(run, std::nullopt);
  EXPECT_THAT(md, HasSubstr("decode reads faster than the measured memory bandwidth"));
  EXPECT_THAT(md, HasSubstr("prefill runs above the measured f32 GEMM peak (MFU 250.0 %)"));
  EXPECT_THAT(bench_table(run, std::nullopt), HasSubstr("served from the CPU caches"));
}

TEST(BenchReport, SiPrefixes) {
  EXPECT_EQ(si(0), "0.00 ");
  EXPECT_EQ(si(1234567), "1.23 M");
  EXPECT_EQ(si(2e11), "200 G");
  EXPECT_EQ(si(999.4), "999 ");
  EXPECT_EQ(si(999.6), "1.00 k");
}

// Tags open and close in nested order (self-closing ones count as both), the root is one
// <svg>, and every number in an attribute is finite.
void expect_well_formed_svg(const std::string& svg) {
  std::vector<std::string> open;
  int roots = 0;
  const std::regex tag(R"(<(/?)([a-zA-Z]+)([^>]*?)(/?)>)");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), tag); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    if (m[1] == "/") {
      ASSERT_FALSE(open.empty()) << "closing </" << m[2] << "> with nothing open";
      ASSERT_EQ(open.back(), m[2]) << "closing </" << m[2] << "> inside <" << open.back() << ">";
      open.pop_back();
    } else if (m[4] != "/") {
      if (open.empty()) ++roots;
      open.push_back(m[2]);
    }
    const std::string attributes = m[3];
    const std::regex value(R"re(="([^"]*)")re");
    for (auto a = std::sregex_iterator(attributes.begin(), attributes.end(), value);
         a != std::sregex_iterator(); ++a) {
      const std::string text = (*a)[1];
      EXPECT_EQ(text.find("nan"), std::string::npos) << text;  // how fmt prints non-finite numbers
      EXPECT_EQ(text.find("inf"), std::string::npos) << text;
    }
  }
  EXPECT_TRUE(open.empty()) << "unclosed <" << (open.empty() ? "" : open.back()) << ">";
  EXPECT_EQ(roots, 1);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(svg.find('<', svg.find("</svg>") + 1), std::string::npos);
}

TEST(BenchCharts, ThroughputIsWellFormedAndShowsEachPhase) {
  const std::string svg = throughput_svg(hand_run());
  expect_well_formed_svg(svg);
  EXPECT_THAT(svg, HasSubstr(">prefill</text>"));
  EXPECT_THAT(svg, HasSubstr(">decode</text>"));
  EXPECT_THAT(svg, HasSubstr(">train</text>"));
  EXPECT_THAT(svg, HasSubstr(">1</text>"));  // the batch axis
  EXPECT_THAT(svg, HasSubstr(">4</text>"));
}

TEST(BenchCharts, RooflineIsWellFormedAndPlacesEachPhase) {
  const std::string svg = roofline_svg(hand_run());
  expect_well_formed_svg(svg);
  EXPECT_THAT(svg, HasSubstr("f32 GEMM peak 200 GFLOP/s"));
  EXPECT_THAT(svg, HasSubstr("read 40.0 GB/s"));
  EXPECT_THAT(svg, HasSubstr("prefill (batch 1): 50 % of roof"));
  EXPECT_THAT(svg, HasSubstr("decode (batch 1): 32 % of roof"));
  EXPECT_THAT(svg, HasSubstr("decode (batch 4): 32 % of roof"));
  EXPECT_THAT(svg, HasSubstr("train (batch 1): 38 % of roof"));
  // Text is escaped: the model name could hold markup characters.
  BenchRun run = hand_run();
  run.model.name = "a<b>&c";
  const std::string escaped = roofline_svg(run);
  expect_well_formed_svg(escaped);
  EXPECT_THAT(escaped, HasSubstr("a&lt;b&gt;&amp;c"));
}

TEST(BenchReport, WritesTheFourFiles) {
  const testing::TempDir dir;
  const BenchRun run = hand_run();
  write_bench_report(dir.path() / "out", bench_json(run, std::nullopt, utc_now()), run, std::nullopt);
  EXPECT_EQ(nlohmann::json::parse(dir.read("out/bench.json"))["schema"], "tokenmill.bench/1");
  EXPECT_THAT(dir.read("out/bench.md"), HasSubstr("| decode |"));
  expect_well_formed_svg(dir.read("out/throughput.svg"));
  expect_well_formed_svg(dir.read("out/roofline.svg"));
  testing::expect_error([&] { write_bench_report(dir.path() / "out/bench.json", {}, run, std::nullopt); },
                        {"bench.json"});
}

TEST(BenchCompare, ReadsThePeersPhases) {
  const Comparison c =
      run_peer(R"(echo '{"engine": "x", "phases": [{"phase": "decode", "batch": 1, "tokens_per_s": 64}]}')");
  ASSERT_EQ(c.phases.size(), 1u);
  EXPECT_EQ(c.phases[0].phase, "decode");
  EXPECT_DOUBLE_EQ(c.phases[0].tokens_per_s, 64.0);
  EXPECT_DOUBLE_EQ(throughput_ratio(hand_run(), c.phases[0]).value(), 2.0);
  EXPECT_FALSE(throughput_ratio(hand_run(), {"decode", 1, 0.0}).has_value());
}

TEST(BenchCompare, AFailingOrMalformedPeerIsAnError) {
  testing::expect_error([] { run_peer("exit 3"); }, {"'exit 3' failed", "exit status 3"});
  testing::expect_error([] { run_peer("echo not json"); }, {"did not print one JSON object", "not json"});
  testing::expect_error([] { parse_peer_output("p", R"({"runs": []})"); }, {"no \"phases\" array"});
  testing::expect_error([] { parse_peer_output("p", R"({"phases": [{"phase": "decode", "batch": 1}]})"); },
                        {"phases[0]", "tokens_per_s"});
}

}  // namespace
}  // namespace tokenmill
