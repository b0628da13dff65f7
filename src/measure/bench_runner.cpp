#include "measure/bench_runner.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string_view>

#include <fmt/format.h>

#include "backend/cpu/cpu_features.h"
#include "core/error.h"
#include "core/parallel.h"
#include "measure/bench_model.h"
#include "measure/decode_sweep.h"
#include "measure/flops.h"
#include "measure/nvml_sampler.h"
#include "measure/traffic.h"
#include "measure/train_step_bench.h"
#include "model/transformer.h"
#include "model/weight_placement.h"

namespace tokenmill {

namespace {

using Clock = BenchClock;

// The value after "key:" on the first line of `file` that starts with `key`, or "".
std::string proc_field(const char* file, const std::string& key) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line.compare(0, key.size(), key) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t first = line.find_first_not_of(" \t", colon + 1);
    return first == std::string::npos ? "" : line.substr(first);
  }
  return "";
}

// The CPU for the CPU backend; for a backend with its own memory, its name ("cuda:0 (NVIDIA
// H100 80GB HBM3, sm_90)"), the part before ':' as the backend.
DeviceSummary device_summary(Backend& backend) {
  if (!backend.memory().is_host()) {
    const std::string name(backend.name());
    const size_t colon = name.find(':');
    return {name.substr(0, colon), name, max_thread_count(), ""};
  }
  const std::string name = proc_field("/proc/cpuinfo", "model name");
  return {"cpu", name.empty() ? "unknown CPU" : name, max_thread_count(),
          std::string(cpu_isa_name(best_cpu_isa()))};
}

// Caps prompt + decode to the context, decode first keeping at least one prompt token.
void fit_context(int64_t context, int64_t& prompt, int64_t& decode, std::vector<std::string>& notes) {
  if (decode > context - 1) {
    notes.push_back(
        fmt::format("decode capped from {} to {} tokens: the context is {} tokens and the prompt needs one",
                    decode, context - 1, context));
    decode = context - 1;
  }
  if (prompt > context - decode) {
    notes.push_back(
        fmt::format("prompt capped from {} to {} tokens: the context is {} tokens, {} of them for decode",
                    prompt, context - decode, context, decode));
    prompt = context - decode;
  }
}

}  // namespace

std::optional<uint64_t> peak_resident_bytes() {
  const std::string value = proc_field("/proc/self/status", "VmHWM");  // e.g. "412000 kB"
  uint64_t kib = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), kib);
  if (error != std::errc() || std::string_view(end, value.data() + value.size()) != " kB")
    return std::nullopt;
  return kib * 1024;
}

namespace {

// Splits "a,b,c" at commas (an empty item included).
std::vector<std::string_view> split(std::string_view list) {
  std::vector<std::string_view> items;
  for (size_t begin = 0;;) {
    const size_t comma = list.find(',', begin);
    items.push_back(
        list.substr(begin, comma == std::string_view::npos ? std::string_view::npos : comma - begin));
    if (comma == std::string_view::npos) return items;
    begin = comma + 1;
  }
}

// The prefill phase: one forward_last over the prompt, after a warm-up chunk.
// forward_bytes of the prefill, its experts (a mixture of experts) those its routing read.
double prefill_bytes(const Model& model, DType kv_dtype, const ExpertReads& reads, int64_t tokens,
                     int64_t chunk) {
  const WeightTraffic traffic = weight_traffic(model, kv_dtype);
  if (!model.config.mixture_of_experts()) return forward_bytes(traffic, 0, tokens, chunk);
  return forward_bytes(traffic_without_experts(traffic), 0, tokens, chunk) +
         routed_expert_bytes(traffic, reads, model.config.num_hidden_layers);
}

PhaseMeasurement time_prefill(const Model& model, Backend& backend, std::span<const int32_t> prompt,
                              int64_t context, MemoryBudget& budget) {
  const int64_t chunk = Transformer::kDefaultChunkTokens;
  const DType kv_dtype = model.default_kv_dtype();
  const uint64_t cache_bytes =
      static_cast<uint64_t>(model.config.kv_floats_per_token() * context) * dtype_size(kv_dtype);
  budget.reserve(cache_bytes, fmt::format("the KV cache of the prefill ({} positions)", context),
                 "use shorter --prompt-tokens/--decode-tokens");
  Transformer transformer(model, backend, context, chunk, kv_dtype);
  // Warm-up, one chunk: pages of the mapped weights, kernel scratch, caches.
  transformer.forward_last(prompt.first(std::min(prompt.size(), static_cast<size_t>(chunk))));
  transformer.reset();
  ExpertReads reads;  // a mixture of experts: the experts the prefill's routing read
  if (model.config.mixture_of_experts())
    transformer.observe_expert_routing([&](const ExpertRouting& r) { reads.count(r); });
  const auto start = Clock::now();
  transformer.forward_last(prompt);
  const auto end = Clock::now();
  budget.release(cache_bytes);
  const auto tokens = static_cast<int64_t>(prompt.size());
  return {"prefill",
          1,
          tokens,
          std::chrono::duration<double>(end - start).count(),
          forward_flops(model.config, 0, tokens, 1),
          prefill_bytes(model, kv_dtype, reads, tokens, chunk),
          start,
          end};
}

// Why the automatic train phase cannot run on `model`, or "" when it can; `master_bytes`:
// the training state it still has to allocate.
std::string auto_train_obstacle(const BenchModel& model, uint64_t master_bytes, uint64_t activation_bytes,
                                const MemoryBudget& budget) {
  const std::string& dtype = model.summary.weight_dtype;
  if (model.params == nullptr && dtype != "f32" && dtype != "bf16" && dtype != "f16")
    return fmt::format("the weights are {}; training needs f32, bf16 or f16 weights", dtype);
  if (master_bytes + activation_bytes > budget.left() / 2)
    return fmt::format(
        "its training state ({} of f32 weights, gradients and AdamW moments, {} of activations) would take "
        "more than half of the {} left",
        gib(master_bytes), gib(activation_bytes), gib(budget.left()));
  return "";
}

// The train phase, or nullopt (with a note) when Auto finds it cannot run.
std::optional<PhaseMeasurement> time_training(BenchModel& model, Backend& backend,
                                              const BenchOptions& options, int64_t seq_len,
                                              MemoryBudget& budget, std::vector<std::string>& notes) {
  const ModelConfig& config = model.model->config;
  const bool on_host = backend.memory().is_host();
  // A synthetic model's host master copy is stepped in place; otherwise one is made.
  const bool make_master = model.params == nullptr || !on_host;
  const uint64_t master_bytes = make_master ? 16 * static_cast<uint64_t>(model.summary.parameters) : 0;
  TrainStepBench bench(config, backend,
                       {options.train_batch, seq_len, 2, options.seed, options.train_precision});
  if (options.train == TrainPhase::Auto) {
    const std::string obstacle = auto_train_obstacle(model, master_bytes, bench.activation_bytes(), budget);
    if (!obstacle.empty()) {
      notes.push_back(fmt::format("no train phase: {} (--phases prefill,decode,train forces it)", obstacle));
      return std::nullopt;
    }
  }
  budget.reserve(bench.activation_bytes(),
                 fmt::format("the training activations ({} x {} tokens)", options.train_batch, seq_len),
                 "lower --train-batch or --prompt-tokens, or leave train out of --phases");
  if (options.train_precision != Precision::FP32) {
    const std::string_view precision = precision_name(options.train_precision);
    // At most 2 bytes a parameter: the matrices' copy.
    budget.reserve(2 * static_cast<uint64_t>(model.summary.parameters),
                   fmt::format("the {} copy of the matrices", precision),
                   "train in --train-precision fp32, or leave train out of --phases");
    notes.push_back(fmt::format(
        "train phase in {0}: the matrices multiplied as a {0} copy, FP32 master weights, gradients and AdamW "
        "state",
        precision));
  }
  if (!make_master) return bench.run(*model.params);
  budget.reserve(master_bytes, "the f32 weights, gradients and AdamW moments of training",
                 "leave train out of --phases");
  if (!on_host) {
    ParameterSet on_device(config, &backend);
    on_device.init_gpt2(options.seed);
    return bench.run(on_device);
  }
  model.params = std::make_unique<ParameterSet>(config);
  model.params->load(model.model->weights);
  return bench.run(*model.params);
}

// The weights of the roofline's GEMM (bench_runner.h): those of the run's compute-bound work,
// the train phase's when it ran. A note says so when the other phases multiply another dtype.
DType calibration_weights(const BenchOptions& options, BenchRun& run) {
  const DType inference = run.model.weight_dtype == "bf16"  ? DType::BF16
                          : run.model.weight_dtype == "f16" ? DType::F16
                                                            : DType::F32;
  const bool trained = std::any_of(run.phases.begin(), run.phases.end(),
                                   [](const PhaseMeasurement& p) { return p.phase == "train"; });
  if (!trained) return inference;
  const DType train = compute_dtype(options.train_precision);
  if ((options.prefill || options.decode) && train != inference)
    run.notes.push_back(fmt::format(
        "the roofline's GEMM multiplies {} weights as the train phase does; prefill and decode multiply {} "
        "ones, so their MFU is against that {} peak too (--phases without train calibrates on theirs)",
        dtype_name(train), dtype_name(inference), dtype_name(train)));
  return train;
}

// The sampler of a run on `backend` (a CUDA device: its name starts "cuda:N"), or nullptr
// with `status` saying why not.
std::unique_ptr<NvmlSampler> start_gpu_sampler(Backend& backend, std::string& status) {
  if (backend.memory().is_host()) {
    status = "not sampled: the run is on the CPU";
    return nullptr;
  }
  const std::string name(backend.name());
  int gpu = -1;
  if (name.starts_with("cuda:") &&
      std::from_chars(name.data() + 5, name.data() + name.size(), gpu).ec != std::errc())
    gpu = -1;
  if (gpu < 0) {
    status = fmt::format("not sampled: the run is on {}, not an NVIDIA GPU", name);
    return nullptr;
  }
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::optional<NvmlDeviceId> device = nvml_device_of_cuda(gpu, visible);
  if (!device) {
    status =
        fmt::format("not sampled: CUDA_VISIBLE_DEVICES={} names no NVML device for GPU {}", visible, gpu);
    return nullptr;
  }
  auto sampler = std::make_unique<NvmlSampler>(NvmlSampler::Options{*device});
  if (!sampler->running()) {
    status = "not sampled: " + sampler->failure();
    return nullptr;
  }
  status = fmt::format("sampled every {} ms through NVML ({})", NvmlSampler::Options{}.period.count(),
                       sampler->device_name());
  return sampler;
}

// Stops `sampler` and gives each phase the summary of its span.
void summarize_gpu(NvmlSampler& sampler, BenchRun& run) {
  const std::vector<GpuSample> samples = sampler.stop();
  if (!sampler.failure().empty()) run.gpu_sampling += "; stopped early: " + sampler.failure();
  for (PhaseMeasurement& p : run.phases)
    p.gpu = summarize_gpu_samples(samples, p.began, p.ended, p.seconds, p.tokens);
}

}  // namespace

std::vector<int64_t> parse_batch_sizes(std::string_view list) {
  std::vector<int64_t> sizes;
  for (const std::string_view item : split(list)) {
    int64_t n = 0;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), n);
    if (item.empty() || error != std::errc() || end != item.data() + item.size() || n < 1 || n > 4096)
      fail("--batch: '{}' is not a batch size from 1 to 4096; give a comma-separated list such as 1,2,4,8",
           item);
    sizes.push_back(n);
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

void parse_phases(std::string_view list, BenchOptions& options) {
  options.prefill = options.decode = false;
  options.train = TrainPhase::Off;
  for (const std::string_view item : split(list)) {
    bool* flag = item == "prefill" ? &options.prefill : item == "decode" ? &options.decode : nullptr;
    const bool repeated = flag != nullptr ? *flag : item == "train" && options.train == TrainPhase::On;
    if ((flag == nullptr && item != "train") || repeated)
      fail("--phases: '{}' is {}; give a comma-separated list of prefill, decode and train, each once", item,
           repeated ? "repeated" : "not a phase");
    if (flag != nullptr)
      *flag = true;
    else
      options.train = TrainPhase::On;
  }
}

BenchRun run_bench(BenchModel& bench_model, Backend& backend, const BenchOptions& options,
                   MemoryBudget& budget) {
  if (options.prompt_tokens < 1 || options.decode_tokens < 1)
    fail("bench needs at least one prompt token and one decode token (got {} and {})", options.prompt_tokens,
         options.decode_tokens);
  if (!options.prefill && !options.decode && options.train == TrainPhase::Off)
    fail("bench: no phase to run; --phases takes prefill, decode and train");
  const Model& model = *bench_model.model;
  const ModelConfig& config = model.config;
  if (!weights_in(model.weights, backend.memory()))
    fail("bench: the weights of {} are not in the memory of {} (place_weights first)", model.path.string(),
         backend.name());
  BenchRun run;
  run.device = device_summary(backend);
  run.model = bench_model.summary;

  const int64_t context = config.context_length();
  if (context < 2)
    fail("bench needs a model context of at least 2 tokens (one prompt token, one decode step); {} has {}",
         model.path.string(), context);
  // Without the decode phase the whole context is the prompt's (a train phase's sequences).
  int64_t prompt_tokens = options.prompt_tokens, decode_tokens = options.decode ? options.decode_tokens : 0;
  fit_context(context, prompt_tokens, decode_tokens, run.notes);
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(config.vocab_size - 1));
  std::vector<int32_t> prompt(static_cast<size_t>(prompt_tokens));
  for (int32_t& t : prompt) t = id(rng);

  const std::unique_ptr<NvmlSampler> sampler = start_gpu_sampler(backend, run.gpu_sampling);
  if (options.prefill)
    run.phases.push_back(time_prefill(model, backend, prompt, prompt_tokens + decode_tokens, budget));
  if (options.decode) {
    auto decodes = decode_sweep(model, backend, prompt, decode_tokens, options.batch_sizes, budget);
    run.phases.insert(run.phases.end(), decodes.begin(), decodes.end());
  }
  if (options.train != TrainPhase::Off)
    if (auto train = time_training(bench_model, backend, options, prompt_tokens, budget, run.notes))
      run.phases.push_back(*train);

  if (sampler) summarize_gpu(*sampler, run);
  run.peak_memory_bytes = peak_resident_bytes();
  CalibrationOptions calibration = options.calibration;
  calibration.gemm_weights = calibration_weights(options, run);
  run.ceilings = measure_ceilings(backend, calibration);
  return run;
}

}  // namespace tokenmill
