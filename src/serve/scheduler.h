// Scheduler: decides, at every engine step, which sequences run and how many of their
// tokens (iteration-level batching with chunked prefill).
//
// Policy, per step, within `max_batch_tokens`:
//   1. every running sequence that is decoding gets its one token (streams keep flowing);
//   2. running sequences still prefilling continue, oldest first, with what budget is left
//      (a long prompt is split over several steps);
//   3. waiting requests are admitted in arrival order (a preempted sequence first) while
//      the budget, max_running and free KV blocks allow; a new request reuses cached
//      prefix blocks. Admission never preempts anyone.
// When the step carries decodes, 2 and 3 share at most `max_prefill_with_decodes` tokens: a
// step's time grows with its prompt tokens, and every decoding stream waits for the step,
// so this bounds the gaps between a stream's tokens (inter-token latency) while prompts
// keep being taken in; a step without decodes takes up to max_batch_tokens of prompts.
// A running sequence that needs a block when none is free preempts the newest running
// sequence (possibly itself): its blocks are released and it returns to the front of the
// waiting queue, to be recomputed from its tokens later (they are kept). The oldest
// sequence can always proceed, because the pool holds at least one full-context sequence.
// With an attention span (every layer's sliding window), the blocks a sequence's later
// queries cannot see are released after each step (BlockManager::release_before), so a
// full-context sequence holds at most the blocks of span - 1 + max_batch_tokens positions.
// Speculative decoding: a decoding sequence with a draft (Sequence::draft, set before the
// step is planned) runs its last token and the draft, as much of the draft as the budget
// leaves; its KV counts as computed only up to what the step's logits confirm
// (accept_draft), so rejected draft tokens are never committed to the prefix cache.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "serve/block_manager.h"
#include "serve/sequence.h"

namespace tokenmill {

struct ScheduledSlice {
  Sequence* sequence = nullptr;
  int64_t tokens = 0;        // tokens [computed, computed + tokens) run this step
  bool want_logits = false;  // the slice ends at the sequence's last token: sample after it
  int64_t drafted = 0;       // a decode's last `drafted` tokens are its draft (Sequence::draft)
};

struct SchedulerLimits {
  int64_t max_batch_tokens = 512;         // tokens per step: decodes and prompt chunks
  int64_t max_running = 64;               // sequences in the running batch
  int64_t max_prefill_with_decodes = 64;  // prompt tokens of a step that carries decodes
  int64_t attention_span = 0;             // ModelConfig::attention_span: 0, no sliding release
};

class Scheduler {
 public:
  // Throws Error unless max_running >= 1, max_batch_tokens >= max_running and
  // max_prefill_with_decodes >= 1.
  Scheduler(BlockManager& blocks, const SchedulerLimits& limits);

  void enqueue(std::unique_ptr<Sequence> sequence) { waiting_.push_back(std::move(sequence)); }

  // The next step's slices (empty when there is nothing to run). Moves sequences between
  // waiting and running; reserves the KV blocks the slices write.
  std::vector<ScheduledSlice> plan();

  // After the step: the slices' tokens have their KV (a draft's: not yet confirmed); commits
  // the full blocks to the prefix cache, and releases those out of every later query's sight.
  void complete(const std::vector<ScheduledSlice>& slices);
  // After a drafted decode was sampled: the first `accepted` draft tokens were confirmed (and
  // appended to the sequence); their KV counts as computed, and so does a draft model's KV of
  // those it ran (Sequence::draft_kv_ahead). Clears the draft.
  void accept_draft(Sequence& sequence, int64_t accepted);

  // Removes a finished (or cancelled) sequence, running or waiting, releasing its blocks.
  std::unique_ptr<Sequence> remove(Sequence* sequence);

  const std::vector<std::unique_ptr<Sequence>>& running() const { return running_; }
  const std::deque<std::unique_ptr<Sequence>>& waiting() const { return waiting_; }
  bool idle() const { return running_.empty() && waiting_.empty(); }
  int64_t preemptions() const { return preemptions_; }
  // Tokens of admitted sequences looked up in the prefix cache, and how many were found
  // (counted once per admission: a head of the queue that waits for blocks is not recounted).
  int64_t prefix_queries() const { return prefix_queries_; }
  int64_t prefix_hits() const { return prefix_hits_; }

 private:
  bool reserve_or_preempt(Sequence& sequence, int64_t tokens, std::vector<ScheduledSlice>& slices,
                          int64_t& budget);
  void preempt_newest(std::vector<ScheduledSlice>& slices, int64_t& budget);
  void admit(std::vector<ScheduledSlice>& slices, int64_t& budget);
  void mark_computed(Sequence& sequence, int64_t tokens);

  BlockManager& blocks_;
  SchedulerLimits limits_;
  std::vector<std::unique_ptr<Sequence>> running_;  // in admission order, oldest first
  std::deque<std::unique_ptr<Sequence>> waiting_;
  int64_t preemptions_ = 0;
  int64_t prefix_queries_ = 0, prefix_hits_ = 0;
};

}  // namespace tokenmill
