// Engine: the serving loop. One thread runs iteration-level ("continuous") batching over a
// paged KV cache: at every step, requests join and leave the running batch; each running
// sequence contributes its next decode token, prompts are prefilled in chunks within the
// step's token budget (max_batch_tokens), and all of the step's tokens go through the model
// in one batched forward (weights read once per step, not once per sequence).
//
// Speculative decoding (EngineOptions::speculative): a decode also runs a guessed
// continuation (a draft) after its token, with logits at every row. Row i's logits are
// those the sequence would have had at that position had the guesses before it been its
// tokens, so the sequence samples from row 0, and goes on to row i + 1 only while its
// sampled token equals guess i. Every emitted token is sampled from the target model's
// distribution given the real prefix, with the request's sampler in its usual order: a
// guess only saves the forward pass that would have computed its row. (For a fixed guess
// this is exactly speculative sampling's rejection rule: the guess survives with its
// probability p(guess), and a rejection yields a draw from p without the guess.) With a
// quantized model, whose rows do not depend on the rest of the batch, the output equals that
// without speculation token for token, sampled or greedy.
//
// KV memory is a pool of fixed-size blocks (serve/block_manager.h); full blocks of prompt
// tokens are shared between requests through the prefix cache. When the pool runs out, the
// newest running sequence is preempted (its blocks freed, its tokens recomputed later):
// With a model whose every layer slides, blocks before a sequence's window are freed as it
// advances, so a long sequence holds its window's blocks only.
// requests are delayed, never dropped, and the engine cannot deadlock (the oldest sequence
// always makes progress; a request that cannot fit even alone is refused at submit).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "backend/backend.h"
#include "model/lora.h"
#include "runtime/text_model.h"
#include "serve/engine_request.h"
#include "serve/ngram_draft.h"
#include "serve/request_stream.h"

namespace tokenmill {

struct EngineOptions {
  int64_t block_size = 16;                 // tokens per KV block (a power of two)
  uint64_t kv_cache_bytes = 256ull << 20;  // the KV pool's size
  int64_t max_batch_tokens = 512;          // tokens per forward step (decodes + prefill chunks)
  int64_t max_prefill_with_decodes = 64;   // prompt tokens of a step that carries decodes (scheduler.h)
  int64_t max_running = 64;                // sequences in the running batch
  int64_t max_waiting = 1024;              // queued requests beyond which submit() refuses (HTTP 429)
  int64_t context = 0;                     // longest sequence; 0: the model's context length
  bool prefix_caching = true;
  // Speculative decoding: each decoding sequence runs up to speculative.max_tokens guessed
  // tokens after its last one (0: none), guessed by prompt lookup (serve/ngram_draft.h) or,
  // when set, by `draft_model` (serve/draft_model.h; its weights in the engine backend's
  // memory; it must outlive the engine, and its KV pool comes on top of kv_cache_bytes).
  NgramDraftOptions speculative{.max_tokens = 0, .max_ngram = 3};
  const TextModel* draft_model = nullptr;
  // Guesses are added to a step only while its decode rows, guesses included, stay within
  // this many (oldest sequences first): a step's matmuls cost about the same up to a few
  // rows and grow with them beyond (the CPU's matrix-vector kernels serve up to 4 rows; a
  // GPU, dozens), so past that a guess that is not confirmed costs more than a confirmed one
  // saves. With one stream and the default, three guesses a step.
  int64_t speculative_rows = 4;
  // LoRA adapters (model/peft_adapter.h) a request may run with (EngineRequest::adapter), their
  // tensors in the backend's memory; they must outlive the engine. A step runs requests of
  // every adapter and of the base model together. Prefix caching shares KV blocks only
  // between requests of the same adapter.
  std::vector<const LoraWeights*> adapters;
};

// The KV positions one sequence of `context` positions holds at most at once: its whole
// context, or with an attention span (ModelConfig::attention_span: every layer slides) the
// span - 1 positions before a step (at least a block) and the step's max_batch_tokens, plus
// a block for a window that starts inside one; in whole blocks, no more than the context's.
int64_t kv_positions_per_sequence(const ModelConfig& config, int64_t context, int64_t max_batch_tokens,
                                  int64_t block_size);

// Point-in-time counters and gauges, for /metrics and the dashboard.
struct EngineSnapshot {
  int64_t running = 0, waiting = 0;
  int64_t kv_blocks_total = 0, kv_blocks_used = 0;  // used: held by a running sequence
  int64_t prefix_cache_queries = 0;                 // prompt tokens looked up in the prefix cache
  int64_t prefix_cache_hits = 0;                    // of those, tokens found
  int64_t preemptions = 0;
  int64_t prompt_tokens = 0;     // prompt tokens computed (cached ones excluded)
  int64_t generated_tokens = 0;  // tokens sampled
  int64_t steps = 0;             // forward steps run
  int64_t draft_tokens = 0;      // speculative tokens run
  int64_t accepted_tokens = 0;   // of those, tokens the model confirmed
};

// Timings of each request, reported from the engine thread as they happen (observers must
// be quick and thread-safe).
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  virtual void on_first_token(double seconds_since_submit) = 0;   // time to first token
  virtual void on_next_token(double seconds_since_previous) = 0;  // inter-token latency
  virtual void on_finished(FinishReason reason, double seconds_since_submit, int64_t prompt_tokens,
                           int64_t completion_tokens) = 0;
};

// submit() refusals the HTTP layer turns into 429 / 503.
class EngineBusy : public Error {
 public:
  using Error::Error;
};
class EngineStopped : public Error {
 public:
  using Error::Error;
};

class Engine {
 public:
  struct Capacity {
    uint64_t bytes = 0;  // of the KV pool
    int64_t blocks = 0;
    int64_t block_size = 0;
    int64_t tokens = 0;                  // blocks * block_size
    int64_t full_context_sequences = 0;  // sequences of the whole context that fit at once
  };

  // Sizes the KV pool, starts the loop thread. `model` and `backend` (and `observer`, if
  // any) must outlive the engine. A model without a tokenizer is served token ids in, token
  // ids out: its events carry no text. Throws Error if the pool cannot hold one full-context
  // sequence or an option is out of range.
  Engine(const TextModel& model, Backend& backend, const EngineOptions& options,
         EngineObserver* observer = nullptr);
  ~Engine();  // shutdown(0)
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request; its events arrive on the returned stream. Throws Error for an invalid
  // request (empty prompt, prompt not shorter than the context, token outside the
  // vocabulary, bad sampling parameters, no such adapter, stop strings without a tokenizer:
  // the message names the field), EngineBusy when
  // max_waiting requests are queued, EngineStopped after shutdown() began.
  std::shared_ptr<RequestStream> submit(EngineRequest request);

  // Stops accepting requests, lets those in flight finish for up to `grace`, ends the rest
  // with FinishReason::Shutdown, and joins the loop thread.
  void shutdown(std::chrono::milliseconds grace);

  // Runs `task` on the engine thread between two steps, so that it may use the engine's model
  // and backend (a backend serves one thread at a time) while requests are in flight; returns
  // once it ran, rethrowing what it threw. Throws EngineStopped after shutdown() began.
  void run_between_steps(const std::function<void()>& task);

  EngineSnapshot snapshot() const;
  const Capacity& capacity() const;
  int64_t context() const;
  uint64_t draft_pool_bytes() const;  // the draft model's KV pool (0: none)

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tokenmill
