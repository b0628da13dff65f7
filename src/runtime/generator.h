// generate(): prefill a prompt, then decode token by token until an eos id or the limit.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/transformer.h"
#include "runtime/sampler.h"

namespace tokenmill {

struct GenerateRequest {
  std::vector<int32_t> prompt;
  int64_t max_new_tokens = 32;
  SamplingParams sampling;
  std::vector<int32_t> eos_token_ids;  // generation stops after producing one of these
  bool ignore_eos = false;
};

enum class GenerateFinish { Length, Eos, Context };

struct GenerateResult {
  std::vector<int32_t> ids;  // generated tokens (an eos that ended generation included)
  GenerateFinish finish = GenerateFinish::Length;
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;              // time for the tokens after the first one
  double prompt_tokens_per_second() const;  // over the tokens computed, not the cached ones
  double decode_tokens_per_second() const;
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;  // prompt tokens whose KV the transformer already held
};

// The sampling a model asks for by default (generation_config.json), as transformers
// reads it: greedy unless do_sample is true; sampling defaults temperature 1, top_k 50.
SamplingParams default_sampling(const ModelConfig& config);

// Called with each new token as soon as it is chosen; return false to stop early.
using TokenCallback = std::function<bool(int32_t)>;

// Runs `request`. The transformer's cache is reused for the longest prefix the prompt shares
// with the sequence it holds (so a chat only computes each turn's new tokens); the rest of
// the cache is discarded.
GenerateResult generate(Transformer& transformer, const GenerateRequest& request,
                        const TokenCallback& on_token = {});

}  // namespace tokenmill
