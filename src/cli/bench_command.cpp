#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/device_flag.h"
#include "core/device_memory.h"
#include "core/error.h"
#include "measure/bench_model.h"
#include "measure/bench_report.h"

namespace tokenmill::cli {

namespace {

struct BenchFlags {
  std::string model, shape, dtype, batch, phases, train_precision;
  std::string device = "auto";
  HostWeights host_weights = HostWeights::Mapped;
  bool json = false;
  std::string out_dir;
  std::string compare;
  double max_memory_gib = 0;  // 0: what the host has available
  BenchOptions options;
};

DType shape_dtype(const std::string& name) {
  if (name.empty() || name == "f32") return DType::F32;
  if (name == "bf16") return DType::BF16;
  if (name == "f16") return DType::F16;
  fail("--dtype must be f32, bf16 or f16, got '{}'", name);
}

BenchModel bench_model(const BenchFlags& f, MemoryBudget& budget) {
  if (!f.model.empty() && !f.shape.empty())
    fail(
        "give either -m MODEL or --shape NAME, not both (--shape benchmarks random weights of a standard "
        "shape)");
  if (f.model.empty() && f.shape.empty())
    fail(
        "bench needs a model: -m MODEL (a directory or a GGUF file) or --shape NAME (`tokenmill bench "
        "--shape "
        "list` names them)");
  if (!f.model.empty()) {
    if (!f.dtype.empty())
      fail("--dtype applies to --shape only: a loaded model keeps the types it is stored in");
    return load_bench_model(f.model);
  }
  return synthetic_bench_model(shape_preset(f.shape), shape_dtype(f.dtype), f.options.seed, budget);
}

void run_bench_command(BenchFlags f) {
  if (f.shape == "list") {
    fmt::print("{}", shape_list());
    return;
  }
  if (!f.batch.empty()) f.options.batch_sizes = parse_batch_sizes(f.batch);
  if (!f.phases.empty()) parse_phases(f.phases, f.options);
  if (!f.train_precision.empty())
    f.options.train_precision = parse_precision(f.train_precision, "--train-precision");
  // --max-memory-gib, or else what the memory has available.
  const auto budget_of = [&](const DeviceMemory& memory) {
    return MemoryBudget(f.max_memory_gib > 0 ? static_cast<uint64_t>(f.max_memory_gib * (1u << 30))
                                             : memory.available());
  };
  MemoryBudget budget = budget_of(host_memory());
  std::unique_ptr<Backend> backend;  // declared before the model: the placed weights live in its memory
  BenchModel model = bench_model(f, budget);
  backend = open_device(f.device, *model.model, f.host_weights);
  if (backend->memory().is_host() && model.model->weights.placed.bytes() > 0)  // --no-mmap's copy
    budget.reserve(model.model->weights.placed.bytes(), "the weights --no-mmap copied into memory",
                   "drop --no-mmap, or raise --max-memory-gib");
  // A device's phase buffers come from its own memory: --max-memory-gib, or what it has left
  // with the weights in it.
  std::optional<MemoryBudget> device_budget;
  if (!backend->memory().is_host()) device_budget = budget_of(backend->memory());
  // The peer first: a failing peer command stops the run before the long part.
  std::optional<Comparison> compare;
  if (!f.compare.empty()) compare = run_peer(f.compare);
  const BenchRun run = run_bench(model, *backend, f.options, device_budget ? *device_budget : budget);
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
                                 "Measure prefill, batched decode and training-step throughput, MFU and "
                                 "bandwidth against the device's measured roofline");
  auto f = std::make_shared<BenchFlags>();
  cmd->add_option("-m,--model", f->model, "Model directory (config.json + *.safetensors) or GGUF file");
  cmd->add_option(
      "--shape", f->shape,
      "Instead of -m: a standard architecture with seeded random weights (`--shape list` names them)");
  cmd->add_option("--dtype", f->dtype, "Weights of a --shape model: f32 (default), bf16 or f16");
  add_device_flag(*cmd, f->device);
  add_no_mmap_flag(*cmd, f->host_weights);
  cmd->add_flag("--json", f->json, "Print bench.json to stdout instead of the table");
  cmd->add_option("--out", f->out_dir,
                  "Write bench.json, bench.md, throughput.svg and roofline.svg to this directory");
  cmd->add_option("--prompt-tokens", f->options.prompt_tokens,
                  "Prefill prompt length, also the training sequence length (default 512)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  cmd->add_option("--decode-tokens", f->options.decode_tokens,
                  "Greedy decode steps after the prompt (default 128)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  cmd->add_option("--batch", f->batch, "Decode batch sizes, comma-separated (default 1,2,4,8)");
  cmd->add_option("--phases", f->phases,
                  "Phases to run, comma-separated from prefill, decode, train (default: prefill and decode, "
                  "plus train when the model can train in half the free memory)");
  cmd->add_option("--train-batch", f->options.train_batch, "Sequences per training step (default 1)")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  cmd->add_option("--train-precision", f->train_precision,
                  "fp32 (default) or bf16: the train phase multiplies with a bf16 copy of the matrices, FP32 "
                  "master weights, gradients and AdamW state (as `train --precision bf16`)");
  cmd->add_option("--max-memory-gib", f->max_memory_gib,
                  "Memory the run may allocate, in GiB (default: what the host, and a GPU, have available)")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--seed", f->options.seed,
                  "Seed of the random weights, prompt and training tokens (default 1234)");
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
