#include "measure/bench_runner.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <fstream>
#include <random>
#include <string_view>

#include <fmt/format.h>

#include "backend/cpu/cpu_features.h"
#include "core/error.h"
#include "core/parallel.h"
#include "measure/flops.h"
#include "measure/traffic.h"
#include "model/transformer.h"

namespace tokenmill {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

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

DeviceSummary cpu_device() {
  const std::string name = proc_field("/proc/cpuinfo", "model name");
  return {"cpu", name.empty() ? "unknown CPU" : name, thread_count(),
          std::string(cpu_isa_name(best_cpu_isa()))};
}

ModelSummary summarize(const Model& model) {
  ModelSummary s;
  s.name = model.path.filename().string();
  s.architecture = model.config.architecture;
  s.parameters = model.parameter_count();
  uint64_t largest = 0;
  for (const auto& [dtype, bytes] : model.weight_bytes_by_type()) {
    s.weight_bytes += bytes;
    if (bytes > largest) {
      largest = bytes;
      s.weight_dtype = dtype;
    }
  }
  std::transform(s.weight_dtype.begin(), s.weight_dtype.end(), s.weight_dtype.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

int32_t argmax(const Tensor& logits) {
  const float* v = logits.as<float>();
  return static_cast<int32_t>(std::max_element(v, v + logits.cols()) - v);
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

BenchRun run_bench(const Model& model, const BenchOptions& options) {
  if (options.prompt_tokens < 1 || options.decode_tokens < 1)
    fail("bench needs at least one prompt token and one decode token (got {} and {})", options.prompt_tokens,
         options.decode_tokens);
  const ModelConfig& config = model.config;
  const auto backend = make_cpu_backend();
  const int64_t chunk = Transformer::kDefaultChunkTokens;
  Transformer transformer(model, *backend, 0, chunk);
  BenchRun run;
  run.device = cpu_device();
  run.model = summarize(model);

  if (transformer.context() < 2)
    fail("bench needs a model context of at least 2 tokens (one prompt token, one decode step); {} has {}",
         model.path.string(), transformer.context());
  int64_t prompt_tokens = options.prompt_tokens, decode_tokens = options.decode_tokens;
  fit_context(transformer.context(), prompt_tokens, decode_tokens, run.notes);
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(config.vocab_size - 1));
  std::vector<int32_t> prompt(static_cast<size_t>(prompt_tokens));
  for (int32_t& t : prompt) t = id(rng);

  // Warm-up, one chunk and two steps: pages of the mapped weights, kernel scratch, caches.
  const auto warm_up = std::span(prompt).first(std::min(prompt.size(), static_cast<size_t>(chunk)));
  int32_t token = argmax(transformer.forward_last(warm_up));
  for (int step = 0; step < 2 && transformer.position() < transformer.context(); ++step)
    token = argmax(transformer.forward_last({&token, 1}));
  transformer.reset();

  auto start = Clock::now();
  token = argmax(transformer.forward_last(prompt));
  const double prefill_seconds = seconds_since(start);
  start = Clock::now();
  for (int64_t step = 0; step < decode_tokens; ++step) token = argmax(transformer.forward_last({&token, 1}));
  const double decode_seconds = seconds_since(start);

  const WeightTraffic traffic = weight_traffic(model, model.default_kv_dtype());
  run.phases.push_back({"prefill", 1, prompt_tokens, prefill_seconds,
                        forward_flops(config, 0, prompt_tokens, 1),
                        forward_bytes(traffic, 0, prompt_tokens, chunk)});
  double decode_bytes = 0;
  for (int64_t p = prompt_tokens; p < prompt_tokens + decode_tokens; ++p)
    decode_bytes += forward_bytes(traffic, p, 1, chunk);
  run.phases.push_back({"decode", 1, decode_tokens, decode_seconds,
                        forward_flops(config, prompt_tokens, decode_tokens, decode_tokens), decode_bytes});

  run.peak_memory_bytes = peak_resident_bytes();
  run.ceilings = measure_ceilings(*backend, options.calibration);
  return run;
}

}  // namespace tokenmill
