// What the serving engine is asked to do and what it answers, one generation at a time
// (an OpenAI request with n choices becomes n engine requests).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "grammar/constrained_grammar.h"
#include "runtime/logprobs.h"
#include "runtime/sampler.h"

namespace tokenmill {

struct EngineRequest {
  std::vector<int32_t> prompt;  // at least one token, shorter than the context
  // Tokens to generate at most; the engine clamps it to what fits in the context.
  int64_t max_tokens = 16;
  SamplingParams sampling;
  std::vector<std::string> stop;        // stop strings (not part of the output)
  std::vector<int32_t> stop_token_ids;  // generation ends after one of these (besides eos)
  bool ignore_eos = false;
  int32_t top_logprobs = -1;        // < 0: no logprobs; else alternatives per token (0..20)
  bool skip_special_tokens = true;  // in the returned text
  // Set: the generated text follows this grammar (structured outputs); only tokens it allows
  // are sampled, an end-of-generation token only once the text is a whole sentence, and the
  // request stops (finish Stop) once nothing more is allowed.
  std::shared_ptr<const ConstrainedGrammar> grammar;
  // An embedding request: nothing is generated (max_tokens and sampling are ignored); the
  // last event carries the final hidden state (after the final norm) of the prompt's last
  // token, finish Stop.
  bool embed = false;
  // The LoRA adapter the request runs with: an index into EngineOptions::adapters, or -1 for
  // the base model.
  int32_t adapter = -1;
  // The engine ends the request (finish Timeout) once this passes.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

enum class FinishReason {
  Length,     // max_tokens or the context reached
  Stop,       // an eos id, a stop token id or a stop string
  Cancelled,  // the client went away (RequestStream::cancel)
  Timeout,    // the deadline passed
  Shutdown,   // the server stopped before the request finished
  Error,      // the engine failed (logged); the request got what was generated until then
};
const char* finish_reason_name(FinishReason reason);  // "length", "stop", "cancelled", ...

// One step's output for one request. Events arrive in order; the last one has `finish`.
struct StreamEvent {
  std::vector<int32_t> tokens;         // tokens generated since the previous event
  std::string text;                    // their text (stop strings removed; may be "")
  std::vector<TokenLogprob> logprobs;  // one per token when top_logprobs >= 0
  std::optional<FinishReason> finish;
  // Set on the last event.
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_prompt_tokens = 0;  // prompt tokens whose KV came from the prefix cache
  std::vector<float> embedding;      // an embedding request's [hidden], on its last event
};

}  // namespace tokenmill
