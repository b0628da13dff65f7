#include "runtime/generator.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace tokenmill {

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

double GenerateResult::prompt_tokens_per_second() const {
  return prefill_seconds > 0.0 ? static_cast<double>(prompt_tokens - cached_prompt_tokens) / prefill_seconds
                               : 0.0;
}

double GenerateResult::decode_tokens_per_second() const {
  const auto decoded = static_cast<double>(ids.size() > 1 ? ids.size() - 1 : 0);
  return decode_seconds > 0.0 ? decoded / decode_seconds : 0.0;
}

SamplingParams default_sampling(const ModelConfig& config) {
  const GenerationDefaults& g = config.generation;
  SamplingParams p;
  if (!g.do_sample.value_or(false)) return p;  // greedy
  p.temperature = static_cast<float>(g.temperature.value_or(1.0));
  p.top_k = static_cast<int32_t>(g.top_k.value_or(50));
  p.top_p = static_cast<float>(g.top_p.value_or(1.0));
  p.min_p = static_cast<float>(g.min_p.value_or(0.0));
  p.repetition_penalty = static_cast<float>(g.repetition_penalty.value_or(1.0));
  return p;
}

GenerateResult generate(Transformer& transformer, const GenerateRequest& request,
                        const TokenCallback& on_token) {
  if (request.prompt.empty()) fail("the prompt is empty: give at least one token");
  if (request.max_new_tokens < 0) fail("the number of tokens to generate must be >= 0");
  request.sampling.validate();
  if (static_cast<int64_t>(request.prompt.size()) > transformer.context())
    fail("the prompt has {} tokens but the context holds {}", request.prompt.size(), transformer.context());

  GenerateResult result;
  result.prompt_tokens = static_cast<int64_t>(request.prompt.size());
  if (request.max_new_tokens == 0) return result;
  // Keep the cached prefix this prompt shares with the previous sequence (a chat's earlier
  // turns); at least the last prompt token is recomputed, for its logits.
  const std::vector<int32_t>& cached = transformer.tokens();
  const size_t limit = std::min(cached.size(), request.prompt.size() - 1);
  const size_t reused =
      static_cast<size_t>(std::mismatch(cached.begin(), cached.begin() + static_cast<std::ptrdiff_t>(limit),
                                        request.prompt.begin())
                              .first -
                          cached.begin());
  transformer.truncate(static_cast<int64_t>(reused));
  result.cached_prompt_tokens = static_cast<int64_t>(reused);
  Sampler sampler(request.sampling);
  std::vector<int32_t> history = request.prompt;
  history.reserve(history.size() + static_cast<size_t>(request.max_new_tokens));

  auto start = std::chrono::steady_clock::now();
  Tensor logits = transformer.forward_last(std::span(request.prompt).subspan(reused));
  const auto vocab = static_cast<size_t>(logits.numel());
  for (int64_t step = 0;; ++step) {
    const int32_t token = sampler.sample({logits.as<float>(), vocab}, history, request.prompt.size());
    if (step == 0) {
      result.prefill_seconds = seconds_since(start);
      start = std::chrono::steady_clock::now();
    }
    result.ids.push_back(token);
    history.push_back(token);
    const bool keep_going = !on_token || on_token(token);
    const bool is_eos = std::find(request.eos_token_ids.begin(), request.eos_token_ids.end(), token) !=
                        request.eos_token_ids.end();
    if (is_eos && !request.ignore_eos) {
      result.finish = GenerateFinish::Eos;
      break;
    }
    if (static_cast<int64_t>(result.ids.size()) >= request.max_new_tokens || !keep_going) break;
    if (transformer.position() >= transformer.context()) {
      result.finish = GenerateFinish::Context;
      break;
    }
    logits = transformer.forward_last({&token, 1});
  }
  result.decode_seconds = seconds_since(start);
  return result;
}

}  // namespace tokenmill
