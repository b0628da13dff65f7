#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "measure/bench_report.h"

namespace tokenmill::cli {

namespace {

struct BenchFlags {
  std::string model;
  bool json = false;
  std::string out_dir;
  std::string compare;
  BenchOptions options;
};

void run_bench_command(const BenchFlags& f) {
  const auto model = Model::load(f.model);
  // The peer first: a failing peer command stops the run before the long part.
  std::optional<Comparison> compare;
  if (!f.compare.empty()) compare = run_peer(f.compare);
  const BenchRun run = run_bench(*model, f.options);
  const nlohmann::json json = bench_json(run, compare, utc_now());
  if (!f.out_dir.empty()) write_bench_report(f.out_dir, json, run, compare);
  if (f.json) {
    fmt::print("{}\n", json.dump(2));
  } else {
    fmt::print("{}", bench_table(run, compare));
    if (!f.out_dir.empty())
      fmt::print("wrote bench.json, bench.md, throughput.svg, roofline.svg to {}\n", f.out_dir);
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench",
                                 "Measure prefill and decode throughput, MFU and bandwidth against the "
                                 "device's measured roofline");
  auto f = std::make_shared<BenchFlags>();
  cmd->add_option("-m,--model", f->model, "Model directory (config.json + *.safetensors) or GGUF file")
      ->required();
  cmd->add_flag("--json", f->json, "Print bench.json to stdout instead of the table");
  cmd->add_option("--out", f->out_dir,
                  "Write bench.json, bench.md, throughput.svg and roofline.svg to this directory");
  cmd->add_option("--prompt-tokens", f->options.prompt_tokens, "Prefill prompt length (default 512)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  cmd->add_option("--decode-tokens", f->options.decode_tokens,
                  "Greedy decode steps after the prompt (default 128)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  cmd->add_option("--calibration-seconds", f->options.calibration.min_seconds,
                  "Minimum length of each roofline calibration pass (default 0.3; shorter is noisier)")
      ->check(CLI::Range(0.001, 60.0));
  cmd->add_option(
      "--compare", f->compare,
      "A peer's benchmark command printing JSON {\"phases\": [{\"phase\", \"batch\", \"tokens_per_s\"}]}; "
      "reports ours / peer");
  cmd->callback([f] { run_bench_command(*f); });
}

}  // namespace tokenmill::cli
