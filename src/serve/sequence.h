// Sequence: one engine request while the engine works on it: its tokens (prompt, then the
// generated ones), how many of them have their KV in the pool, its block table, and the
// per-request output state (sampler, streaming detokenizer, stop strings).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/stop_matcher.h"
#include "serve/block_manager.h"
#include "serve/engine_request.h"
#include "serve/request_stream.h"
#include "tokenizer/streaming_decoder.h"

namespace tokenmill {

class Sequence {
 public:
  using Clock = std::chrono::steady_clock;

  // `max_total` bounds prompt + generated tokens (the request's max_tokens clamped to the
  // context). `eos_ids` end generation unless the request ignores eos. Without a tokenizer
  // (null) the events carry token ids and no text, and the request must have no stop strings.
  Sequence(uint64_t id, EngineRequest request, std::shared_ptr<RequestStream> stream,
           const Tokenizer* tokenizer, const std::vector<int32_t>& eos_ids, int64_t max_total);

  uint64_t id() const { return id_; }
  const EngineRequest& request() const { return request_; }
  RequestStream& stream() { return *stream_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int64_t prompt_length() const { return prompt_length_; }
  int64_t generated() const { return static_cast<int64_t>(tokens_.size()) - prompt_length_; }
  // Tokens whose KV is not in the pool yet: the prompt (or what is left of it), then one
  // per step: the last sampled token.
  int64_t pending() const { return static_cast<int64_t>(tokens_.size()) - computed; }

  int64_t computed = 0;  // tokens [0, computed) have their KV in `table`
  BlockTable table;
  // Speculative decoding: tokens guessed to follow the last one, set before a step is
  // planned (the scheduler may shorten it); the step runs them after the last token, and
  // each logits row checks the next guess (serve/engine.h).
  std::vector<int32_t> draft;
  int64_t draft_computed = 0;  // a draft model's KV covers tokens [0, draft_computed) (serve/draft_model.h)
  int64_t draft_kv_ahead = 0;  // and the first this many guesses, at their positions
  int64_t cached_prompt_tokens = 0;  // from the prefix cache, at first admission
  bool admitted_before = false;      // preempted sequences keep their first admission's figures

  // Samples the next token from this step's logits row (modified in place), appends it and
  // returns the event for the client; the event carries `finish` when generation is over.
  StreamEvent advance(std::span<float> logits);
  // Tokens it may still generate (max_tokens and the context allow).
  int64_t room() const { return max_total_ - static_cast<int64_t>(tokens_.size()); }
  // The `count` tokens a step runs from `computed` on: pending ones, or for a decode with a
  // draft (drafted > 0) the last token and then the draft's first drafted tokens.
  std::span<const int32_t> step_tokens(int64_t count, int64_t drafted);
  // The last event of a request ended from outside (cancelled, timed out, shut down).
  StreamEvent end(FinishReason reason);
  // The last event of an embedding request, once its prompt is computed: `hidden`, the final
  // hidden state of its last token.
  StreamEvent embedded(std::vector<float> hidden);

  Clock::time_point submitted() const { return submitted_; }
  Clock::time_point last_token_time() const { return last_token_; }

 private:
  StreamEvent finished_event(StreamEvent event, FinishReason reason);
  bool is_stop_token(int32_t token) const;
  // Structured outputs: sets the logits of every token the grammar does not allow next to
  // -inf; end-of-generation tokens stay only when the text so far is a whole sentence (or
  // nothing else is possible).
  void constrain(std::span<float> logits) const;
  bool grammar_allows(int32_t token) const;
  // Samples under the grammar. Without top-k/top-p/min-p truncation (greedy included) it
  // first samples as if unconstrained and keeps the token when the grammar takes it, which
  // spares computing the mask: drawing t ~ p and keeping it if allowed, else drawing from p
  // restricted to the allowed tokens, picks each allowed token with probability
  // p(t) / P(allowed), exactly what sampling from the masked logits does (and greedy's pick
  // is the masked pick). With truncation the mask comes first, as the truncation must see it.
  int32_t sample_constrained(std::span<float> logits);

  uint64_t id_;
  EngineRequest request_;
  std::shared_ptr<RequestStream> stream_;
  std::vector<int32_t> tokens_;
  int64_t prompt_length_;
  int64_t max_total_;
  const std::vector<int32_t>& eos_ids_;
  Sampler sampler_;
  std::optional<StreamingDecoder> decoder_;  // with a tokenizer
  StopMatcher stops_;
  std::optional<GrammarMatcher> grammar_;    // with request_.grammar
  std::vector<float> raw_logits_;            // the row before sampling, when logprobs are asked for
  std::vector<float> unconstrained_logits_;  // the row before a first, unconstrained draw
  std::vector<int32_t> drafted_step_;        // step_tokens' result for a drafted decode
  Clock::time_point submitted_ = Clock::now();
  Clock::time_point last_token_ = submitted_;
};

}  // namespace tokenmill
