#include "serve/engine.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>

#include "model/paged_transformer.h"
#include "serve/draft_model.h"
#include "serve/ngram_draft.h"
#include "serve/scheduler.h"

namespace tokenmill {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

Engine::Capacity size_pool(const ModelConfig& config, const EngineOptions& options, int64_t context,
                           DType kv_dtype) {
  // First: it validates the block size.
  const int64_t per_sequence =
      kv_positions_per_sequence(config, context, options.max_batch_tokens, options.block_size) /
      options.block_size;
  Engine::Capacity c;
  c.block_size = options.block_size;
  const uint64_t per_block = PagedTransformer::block_bytes(config, options.block_size, kv_dtype);
  c.blocks = static_cast<int64_t>(options.kv_cache_bytes / per_block);
  c.bytes = static_cast<uint64_t>(c.blocks) * per_block;
  c.tokens = c.blocks * c.block_size;
  c.full_context_sequences = c.blocks / per_sequence;
  if (c.full_context_sequences < 1)
    fail(
        "the KV cache of {} bytes holds {} tokens but one sequence of the full context needs {} ({} bytes): "
        "raise --kv-cache-memory or lower --context",
        options.kv_cache_bytes, c.tokens, per_sequence * c.block_size,
        static_cast<uint64_t>(per_sequence) * per_block);
  return c;
}

}  // namespace

int64_t kv_positions_per_sequence(const ModelConfig& config, int64_t context, int64_t max_batch_tokens,
                                  int64_t block_size) {
  if (block_size < 1 || (block_size & (block_size - 1)) != 0)
    fail("--block-size {} must be a power of two", block_size);
  const auto blocks = [&](int64_t positions) { return (positions + block_size - 1) / block_size; };
  int64_t held = blocks(context);
  // Before a step: the span - 1 positions its first query sees, and at least a block (the last
  // committed one, which the prefix cache's chain keeps).
  if (const int64_t span = config.attention_span(); span > 0)
    held = std::min(held, blocks(std::max(span - 1, block_size) + std::min(max_batch_tokens, context)) + 1);
  return held * block_size;
}

struct Engine::State {
  State(const TextModel& text_model, Backend& backend, const EngineOptions& opts, EngineObserver* obs)
      : model(text_model),
        options(opts),
        observer(obs),
        context(opts.context > 0 ? std::min(opts.context, text_model.model->config.context_length())
                                 : text_model.model->config.context_length()),
        capacity(size_pool(text_model.model->config, opts, context, text_model.model->default_kv_dtype())),
        blocks(capacity.blocks, capacity.block_size, opts.prefix_caching),
        scheduler(blocks, {.max_batch_tokens = opts.max_batch_tokens,
                           .max_running = opts.max_running,
                           .max_prefill_with_decodes = opts.max_prefill_with_decodes,
                           .attention_span = text_model.model->config.attention_span()}),
        runner(*text_model.model, backend, capacity.blocks, capacity.block_size, opts.max_batch_tokens,
               opts.max_running, text_model.model->default_kv_dtype(), context,
               std::min(opts.max_batch_tokens,
                        opts.max_running * (1 + std::max<int64_t>(0, opts.speculative.max_tokens)))) {
    if (opts.max_waiting < 1) fail("--max-waiting must be at least 1 (got {})", opts.max_waiting);
    for (const LoraWeights* adapter : opts.adapters) {
      if (adapter == nullptr) fail("engine options: a LoRA adapter is null");
      check_unmerged_adapter(text_model.model->config, *adapter);
    }
    if (opts.draft_model != nullptr && opts.speculative.max_tokens > 0) {
      if (text_model.model->config.attention_span() > 0)
        fail(
            "a draft model cannot serve a model whose every layer attends within a sliding window: the "
            "early KV blocks it would need are released (use --speculative ngram)");
      drafter.emplace(*opts.draft_model, text_model, backend, capacity.blocks, capacity.block_size,
                      opts.max_batch_tokens, opts.max_running, context);
    }
  }

  void loop();
  void take_incoming();
  void run_tasks();
  void end_requests_from_outside();
  void draft_decodes();
  bool run_step();
  void sample(const ScheduledSlice& slice, const Tensor& logits, int64_t first_row);
  void finish(Sequence* sequence, StreamEvent last);
  void end_running(FinishReason reason);
  void publish_snapshot();

  const TextModel& model;
  EngineOptions options;
  EngineObserver* observer;
  int64_t context;
  Capacity capacity;
  BlockManager blocks;
  Scheduler scheduler;  // engine thread only
  PagedTransformer runner;
  std::optional<DraftModel> drafter;  // with EngineOptions::draft_model
  std::vector<PagedTransformer::Slice> step_slices;
  std::vector<Sequence*> decoding;
  uint64_t next_id = 0;
  int64_t prompt_tokens = 0, generated_tokens = 0, steps = 0, draft_tokens = 0, accepted_tokens = 0;

  mutable std::mutex mutex;  // guards what follows
  std::condition_variable wake;
  std::deque<std::unique_ptr<Sequence>> incoming;
  std::deque<std::packaged_task<void()>> tasks;  // run_between_steps()
  int64_t queued = 0;                            // incoming + the scheduler's waiting, as of the last step
  bool stopping = false;
  Clock::time_point stop_deadline = Clock::time_point::max();
  EngineSnapshot snapshot;
  std::thread thread;
};

Engine::Engine(const TextModel& model, Backend& backend, const EngineOptions& options,
               EngineObserver* observer)
    : state_(std::make_unique<State>(model, backend, options, observer)) {
  state_->publish_snapshot();
  state_->thread = std::thread([s = state_.get()] { s->loop(); });
}

Engine::~Engine() { shutdown(std::chrono::milliseconds(0)); }

std::shared_ptr<RequestStream> Engine::submit(EngineRequest request) {
  State& s = *state_;
  const int64_t vocab = s.model.model->config.vocab_size;
  if (request.prompt.empty()) fail("the prompt is empty: give at least one token");
  if (static_cast<int64_t>(request.prompt.size()) >= s.context)
    fail("the prompt has {} tokens but the context holds {}: nothing would be left to generate",
         request.prompt.size(), s.context);
  for (int32_t id : request.prompt)
    if (id < 0 || id >= vocab) fail("prompt token id {} is outside the vocabulary [0, {})", id, vocab);
  for (int32_t id : request.stop_token_ids)
    if (id < 0 || id >= vocab) fail("stop_token_ids: {} is outside the vocabulary [0, {})", id, vocab);
  if (request.embed) request.max_tokens = 1;  // the step that computes the last prompt token ends it
  if (request.max_tokens < 1) fail("max_tokens must be at least 1 (got {})", request.max_tokens);
  if (request.top_logprobs > 20) fail("top_logprobs must be at most 20 (got {})", request.top_logprobs);
  if (request.adapter < -1 || request.adapter >= static_cast<int64_t>(s.options.adapters.size()))
    fail("adapter {} does not exist: the engine serves {} LoRA adapters", request.adapter,
         s.options.adapters.size());
  if (!s.model.tokenizer && !request.stop.empty())
    fail("stop strings need the model's tokenizer, and {} has none", s.model.model->path.string());
  request.sampling.validate();
  const int64_t max_total =
      std::min(s.context, static_cast<int64_t>(request.prompt.size()) + request.max_tokens);

  auto stream = std::make_shared<RequestStream>();
  {
    const std::lock_guard lock(s.mutex);
    if (s.stopping) throw EngineStopped("the server is shutting down and takes no new requests");
    if (s.queued + static_cast<int64_t>(s.incoming.size()) >= s.options.max_waiting)
      throw EngineBusy(
          fmt::format("{} requests are already waiting: try again shortly", s.options.max_waiting));
    const auto space = static_cast<uint32_t>(request.adapter + 1);  // each adapter its own prefix space
    s.incoming.push_back(std::make_unique<Sequence>(s.next_id++, std::move(request), stream,
                                                    s.model.tokenizer ? &*s.model.tokenizer : nullptr,
                                                    s.model.eos_token_ids, max_total));
    s.incoming.back()->table.space = space;
  }
  s.wake.notify_one();
  return stream;
}

void Engine::shutdown(std::chrono::milliseconds grace) {
  State& s = *state_;
  {
    const std::lock_guard lock(s.mutex);
    if (!s.stopping) {
      s.stopping = true;
      s.stop_deadline = Clock::now() + grace;
    } else {
      s.stop_deadline = std::min(s.stop_deadline, Clock::now() + grace);
    }
  }
  s.wake.notify_one();
  if (s.thread.joinable()) s.thread.join();
}

EngineSnapshot Engine::snapshot() const {
  const std::lock_guard lock(state_->mutex);
  return state_->snapshot;
}

const Engine::Capacity& Engine::capacity() const { return state_->capacity; }
int64_t Engine::context() const { return state_->context; }
uint64_t Engine::draft_pool_bytes() const { return state_->drafter ? state_->drafter->pool_bytes() : 0; }

void Engine::State::loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex);
      wake.wait(lock, [&] { return stopping || !incoming.empty() || !tasks.empty() || !scheduler.idle(); });
      if (stopping && incoming.empty() && tasks.empty() && scheduler.idle()) return;
    }
    run_tasks();
    take_incoming();
    end_requests_from_outside();
    bool stepped = false;
    try {
      stepped = !scheduler.idle() && run_step();
    } catch (const std::exception& e) {  // a bug or an exhausted resource: fail the batch, keep serving
      spdlog::error("engine step failed, ending {} running requests: {}", scheduler.running().size(),
                    e.what());
      end_running(FinishReason::Error);
    }
    publish_snapshot();
    if (!stepped && !scheduler.idle()) {  // nothing could run (cannot happen by design): do not spin
      std::unique_lock lock(mutex);
      wake.wait_for(lock, std::chrono::milliseconds(1));
    }
  }
}

void Engine::run_between_steps(const std::function<void()>& task) {
  State& s = *state_;
  std::future<void> done;
  {
    const std::lock_guard lock(s.mutex);
    if (s.stopping) throw EngineStopped("the engine is shutting down");
    done = s.tasks.emplace_back(task).get_future();
  }
  s.wake.notify_one();
  done.get();
}

void Engine::State::run_tasks() {
  for (;;) {
    std::packaged_task<void()> task;
    {
      const std::lock_guard lock(mutex);
      if (tasks.empty()) return;
      task = std::move(tasks.front());
      tasks.pop_front();
    }
    task();  // an exception is kept for the caller
  }
}

void Engine::State::take_incoming() {
  const std::lock_guard lock(mutex);
  while (!incoming.empty()) {
    scheduler.enqueue(std::move(incoming.front()));
    incoming.pop_front();
  }
}

// Cancelled by the client, past the request's deadline, or past the shutdown grace period.
void Engine::State::end_requests_from_outside() {
  Clock::time_point shutdown_at;
  {
    const std::lock_guard lock(mutex);
    shutdown_at = stop_deadline;
  }
  const Clock::time_point now = Clock::now();
  std::vector<std::pair<Sequence*, FinishReason>> ended;
  const auto check = [&](const std::unique_ptr<Sequence>& s) {
    if (s->stream().cancelled()) {
      ended.emplace_back(s.get(), FinishReason::Cancelled);
    } else if (now >= s->request().deadline) {
      ended.emplace_back(s.get(), FinishReason::Timeout);
    } else if (now >= shutdown_at) {
      ended.emplace_back(s.get(), FinishReason::Shutdown);
    }
  };
  std::for_each(scheduler.running().begin(), scheduler.running().end(), check);
  std::for_each(scheduler.waiting().begin(), scheduler.waiting().end(), check);
  for (const auto& [sequence, reason] : ended) finish(sequence, sequence->end(reason));
}

// Speculative decoding: drafts for the decoding sequences, oldest first, while the step's
// decode rows stay within speculative_rows; each no longer than the tokens its sequence may
// still generate less the one its own row gives (the scheduler may shorten it).
void Engine::State::draft_decodes() {
  if (options.speculative.max_tokens < 1) return;
  decoding.clear();
  for (const std::unique_ptr<Sequence>& s : scheduler.running()) {
    s->draft.clear();
    if (s->pending() == 1 && !s->request().embed) decoding.push_back(s.get());
  }
  const int64_t spare = options.speculative_rows - static_cast<int64_t>(decoding.size());
  if (spare <= 0) return;
  if (drafter) {
    drafter->propose(decoding, options.speculative.max_tokens, spare, blocks);
    return;
  }
  int64_t left = spare;
  for (Sequence* s : decoding) {
    NgramDraftOptions draft = options.speculative;
    draft.max_tokens = std::min({draft.max_tokens, s->room() - 1, left});
    s->draft = ngram_draft(s->tokens(), draft);
    left -= static_cast<int64_t>(s->draft.size());
  }
}

// Runs one step; false when the scheduler found nothing to run.
bool Engine::State::run_step() {
  draft_decodes();
  const std::vector<ScheduledSlice> plan = scheduler.plan();
  if (plan.empty()) return false;
  step_slices.clear();
  for (const ScheduledSlice& p : plan) {
    Sequence& s = *p.sequence;
    const int32_t adapter = s.request().adapter;
    step_slices.push_back({s.step_tokens(p.tokens, p.drafted), s.computed, s.table.blocks,
                           p.want_logits ? 1 + p.drafted : 0,
                           adapter < 0 ? nullptr : options.adapters[static_cast<size_t>(adapter)]});
    if (s.computed < s.prompt_length()) prompt_tokens += std::min(p.tokens, s.prompt_length() - s.computed);
  }
  const Tensor logits = runner.forward(step_slices);
  scheduler.complete(plan);
  ++steps;
  int64_t row = 0;
  for (const ScheduledSlice& p : plan) {
    if (!p.want_logits) continue;
    sample(p, logits, row);
    row += 1 + p.drafted;
  }
  return true;
}

// Samples the slice's sequence from logits rows first_row.. (one, or one per draft token
// and one more), as long as each sampled token confirms the next draft token.
void Engine::State::sample(const ScheduledSlice& slice, const Tensor& logits, int64_t first_row) {
  Sequence& s = *slice.sequence;
  if (s.request().embed) {
    std::vector<float> hidden(static_cast<size_t>(model.model->config.hidden_size));
    runner.copy_hidden_row(first_row, hidden);
    finish(&s, s.embedded(std::move(hidden)));
    return;
  }
  const int64_t vocab = logits.cols();
  draft_tokens += slice.drafted;
  for (int64_t i = 0; i <= slice.drafted; ++i) {
    const Clock::time_point previous = s.last_token_time();
    StreamEvent event =
        s.advance(std::span(logits.as<float>() + (first_row + i) * vocab, static_cast<size_t>(vocab)));
    ++generated_tokens;
    if (observer != nullptr) {
      if (s.generated() == 1) {
        observer->on_first_token(seconds_between(s.submitted(), s.last_token_time()));
      } else {
        observer->on_next_token(seconds_between(previous, s.last_token_time()));
      }
    }
    const bool confirmed = i < slice.drafted && s.tokens().back() == s.draft[static_cast<size_t>(i)];
    if (event.finish) {
      finish(&s, std::move(event));  // s is gone
      return;
    }
    s.stream().push(std::move(event));
    if (!confirmed) {
      if (slice.drafted > 0) scheduler.accept_draft(s, i);
      return;
    }
    ++accepted_tokens;
  }
}

void Engine::State::finish(Sequence* sequence, StreamEvent last) {
  std::unique_ptr<Sequence> owned = scheduler.remove(sequence);
  if (observer != nullptr)
    observer->on_finished(*last.finish, seconds_between(owned->submitted(), Clock::now()), last.prompt_tokens,
                          last.completion_tokens);
  owned->stream().push(std::move(last));
}

void Engine::State::end_running(FinishReason reason) {
  std::vector<Sequence*> running;
  for (const auto& s : scheduler.running()) running.push_back(s.get());
  for (Sequence* s : running) finish(s, s->end(reason));
}

void Engine::State::publish_snapshot() {
  EngineSnapshot snap;
  snap.running = static_cast<int64_t>(scheduler.running().size());
  snap.kv_blocks_total = blocks.num_blocks();
  snap.kv_blocks_used = blocks.used_blocks();
  snap.prefix_cache_queries = scheduler.prefix_queries();
  snap.prefix_cache_hits = scheduler.prefix_hits();
  snap.preemptions = scheduler.preemptions();
  snap.prompt_tokens = prompt_tokens;
  snap.generated_tokens = generated_tokens;
  snap.steps = steps;
  snap.draft_tokens = draft_tokens;
  snap.accepted_tokens = accepted_tokens;
  const std::lock_guard lock(mutex);
  queued = static_cast<int64_t>(scheduler.waiting().size());
  snap.waiting = queued + static_cast<int64_t>(incoming.size());
  snapshot = snap;
}

}  // namespace tokenmill
