#include "serve/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace tokenmill {

Scheduler::Scheduler(BlockManager& blocks, const SchedulerLimits& limits) : blocks_(blocks), limits_(limits) {
  if (limits.max_running < 1)
    fail("the running batch must hold at least one sequence (got {})", limits.max_running);
  if (limits.max_batch_tokens < limits.max_running)
    fail("--max-batch-tokens {} must be at least --max-running {} (one decode token per running sequence)",
         limits.max_batch_tokens, limits.max_running);
  if (limits.max_prefill_with_decodes < 1)
    fail("--max-prefill-with-decodes must be at least 1 (got {}): prompts would wait for every stream to end",
         limits.max_prefill_with_decodes);
}

std::vector<ScheduledSlice> Scheduler::plan() {
  std::vector<ScheduledSlice> slices;
  int64_t budget = limits_.max_batch_tokens;
  const int64_t preempted_before = preemptions_;
  // Decodes first, then continuing prefills; both oldest first. A sequence preempted on
  // the way leaves running_, so iterate over a snapshot of the ids.
  for (const bool decoding : {true, false}) {
    std::vector<Sequence*> order;
    for (const auto& s : running_)
      if ((s->pending() == 1) == decoding) order.push_back(s.get());
    for (Sequence* s : order) {
      if (budget == 0) break;
      const bool still_running = std::any_of(
          running_.begin(), running_.end(), [s](const std::unique_ptr<Sequence>& r) { return r.get() == s; });
      if (!still_running) continue;
      // A decode's draft: what the budget leaves after its own token.
      const int64_t drafted = decoding ? std::min(static_cast<int64_t>(s->draft.size()), budget - 1) : 0;
      s->draft.resize(static_cast<size_t>(drafted));
      const int64_t tokens = std::min(s->pending(), budget) + drafted;
      if (!reserve_or_preempt(*s, tokens, slices, budget)) continue;
      slices.push_back({s, tokens, tokens - drafted == s->pending(), drafted});
      budget -= tokens;
    }
    if (decoding && !slices.empty()) budget = std::min(budget, limits_.max_prefill_with_decodes);
  }
  if (preemptions_ == preempted_before) admit(slices, budget);
  return slices;
}

bool Scheduler::reserve_or_preempt(Sequence& sequence, int64_t tokens, std::vector<ScheduledSlice>& slices,
                                   int64_t& budget) {
  while (!blocks_.reserve(sequence.table, sequence.computed + tokens)) {
    const bool self = running_.back().get() == &sequence;
    preempt_newest(slices, budget);
    if (self) return false;
  }
  return true;
}

void Scheduler::preempt_newest(std::vector<ScheduledSlice>& slices, int64_t& budget) {
  std::unique_ptr<Sequence> victim = std::move(running_.back());
  running_.pop_back();
  const auto planned = std::find_if(slices.begin(), slices.end(),
                                    [&](const ScheduledSlice& s) { return s.sequence == victim.get(); });
  if (planned != slices.end()) {
    budget += planned->tokens;
    slices.erase(planned);
  }
  blocks_.release(victim->table);
  victim->computed = 0;
  victim->draft.clear();
  victim->draft_computed = 0;
  victim->draft_kv_ahead = 0;
  waiting_.push_front(std::move(victim));
  ++preemptions_;
}

void Scheduler::admit(std::vector<ScheduledSlice>& slices, int64_t& budget) {
  while (!waiting_.empty() && budget > 0 && static_cast<int64_t>(running_.size()) < limits_.max_running) {
    Sequence& s = *waiting_.front();
    const int64_t cached = blocks_.match_prefix(s.tokens(), s.table);
    s.computed = cached;
    const int64_t tokens = std::min(s.pending(), budget);
    if (!blocks_.reserve(s.table, s.computed + tokens)) {
      blocks_.release(s.table);
      s.computed = 0;
      return;  // arrival order: nobody overtakes the head of the queue
    }
    prefix_queries_ += static_cast<int64_t>(s.tokens().size());
    prefix_hits_ += cached;
    if (!s.admitted_before) s.cached_prompt_tokens = cached;
    s.admitted_before = true;
    s.draft.clear();  // a prompt runs without one
    slices.push_back({&s, tokens, tokens == s.pending(), 0});
    budget -= tokens;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

void Scheduler::complete(const std::vector<ScheduledSlice>& slices) {
  for (const ScheduledSlice& slice : slices) mark_computed(*slice.sequence, slice.tokens - slice.drafted);
}

void Scheduler::accept_draft(Sequence& sequence, int64_t accepted) {
  sequence.draft.clear();
  // A draft model's KV of the confirmed guesses it ran holds their tokens now.
  sequence.draft_computed += std::min(accepted, sequence.draft_kv_ahead);
  sequence.draft_kv_ahead = 0;
  mark_computed(sequence, accepted);
}

void Scheduler::mark_computed(Sequence& s, int64_t tokens) {
  s.computed += tokens;
  blocks_.commit(s.table, s.tokens(), s.computed);
  // The next query sits at `computed`: it and every later one see positions from
  // computed + 1 - span on.
  if (limits_.attention_span > 0) blocks_.release_before(s.table, s.computed + 1 - limits_.attention_span);
}

std::unique_ptr<Sequence> Scheduler::remove(Sequence* sequence) {
  std::unique_ptr<Sequence> owned;
  const auto matches = [sequence](const std::unique_ptr<Sequence>& s) { return s.get() == sequence; };
  if (const auto it = std::find_if(running_.begin(), running_.end(), matches); it != running_.end()) {
    owned = std::move(*it);
    running_.erase(it);
  } else if (const auto w = std::find_if(waiting_.begin(), waiting_.end(), matches); w != waiting_.end()) {
    owned = std::move(*w);
    waiting_.erase(w);
  }
  if (owned) blocks_.release(owned->table);
  return owned;
}

}  // namespace tokenmill
