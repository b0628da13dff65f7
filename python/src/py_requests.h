// What the Python layer asks the engine for and gets back: Request (an EngineRequest with
// the sampling parameters flattened, the adapter by name and the grammar as GBNF text) and
// Result (a completion gathered from its stream events).
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/logprobs.h"
#include "serve/engine_request.h"
#include "serve/request_stream.h"

namespace tokenmill::python {

namespace py = pybind11;

struct Request {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 16;
  float temperature = 1.0f, top_p = 1.0f, min_p = 0.0f;
  int32_t top_k = 0;
  float repetition_penalty = 1.0f, frequency_penalty = 0.0f, presence_penalty = 0.0f;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int32_t logprobs = -1;  // < 0: none; else alternatives per token
  bool skip_special_tokens = true;
  std::string grammar;  // GBNF text; "": free text
  std::string adapter;  // a LoRA adapter's name; "": the base model
};

// A completion: its stream's events put together.
struct Result {
  std::vector<int32_t> token_ids;
  std::string text;
  std::string finish_reason;  // "" until the last event
  std::vector<TokenLogprob> logprobs;
  bool has_logprobs = false;
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;

  void add(StreamEvent& event);
  bool finished() const { return !finish_reason.empty(); }
};

// Waits for the stream's next event with the GIL released, looking for Ctrl-C (check_signals)
// before each wait and every 50 ms of it.
StreamEvent next_event(RequestStream& stream);

// As next_event, but without looking for signals, for a stream already cancelled (it ends at
// the engine's next step).
StreamEvent next_event_uninterrupted(RequestStream& stream);

// [(token, logprob, [(token, logprob), ...]), ...]
py::list logprobs_list(const std::vector<TokenLogprob>& logprobs);

}  // namespace tokenmill::python
