// Scheduler: the steps it plans for sequences whose forward passes are simulated (complete()
// marks a slice's tokens computed, a sampled token is appended with Sequence::advance). A step
// that carries decodes takes at most max_prefill_with_decodes prompt tokens; a step without
// decodes fills max_batch_tokens.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "serve/scheduler.h"
#include "serve/sequence.h"
#include "support/fixture_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace tokenmill {
namespace {

const Tokenizer& tokenizer() { return testing::smollm_chat_tokenizer(); }

std::unique_ptr<Sequence> sequence(uint64_t id, int64_t prompt_tokens) {
  EngineRequest request;
  request.prompt.assign(static_cast<size_t>(prompt_tokens), 7);
  request.max_tokens = 1000;
  request.ignore_eos = true;
  return std::make_unique<Sequence>(id, std::move(request), std::make_shared<RequestStream>(), &tokenizer(),
                                    tokenizer().eos_ids(), prompt_tokens + 1000);
}

// Runs one planned step: the slices' tokens computed, a token sampled after each slice that
// ends its sequence's pending tokens. Returns {decode tokens, prompt tokens} of the step.
std::pair<int64_t, int64_t> step(Scheduler& scheduler) {
  const std::vector<ScheduledSlice> slices = scheduler.plan();
  int64_t decodes = 0, prompts = 0;
  for (const ScheduledSlice& s : slices)
    (s.sequence->pending() == 1 && s.tokens == 1 ? decodes : prompts) += s.tokens;
  scheduler.complete(slices);
  std::vector<float> logits(static_cast<size_t>(tokenizer().vocab_size()), 0.0f);
  for (const ScheduledSlice& s : slices)
    if (s.want_logits) s.sequence->advance(logits);
  return {decodes, prompts};
}

TEST(Scheduler, AStepWithDecodesTakesAtMostItsPrefillShare) {
  BlockManager blocks(256, 4, false);
  Scheduler scheduler(blocks, {.max_batch_tokens = 32, .max_running = 4, .max_prefill_with_decodes = 5});
  Sequence* a = nullptr;
  {
    auto owned = sequence(1, 3);
    a = owned.get();
    scheduler.enqueue(std::move(owned));
  }
  EXPECT_EQ(step(scheduler), std::make_pair(int64_t{0}, int64_t{3}));  // alone: the whole prompt
  scheduler.enqueue(sequence(2, 40));
  int64_t taken = 0;
  for (int i = 0; i < 4; ++i) {  // a decodes: the new prompt comes in 5 tokens a step
    EXPECT_EQ(step(scheduler), std::make_pair(int64_t{1}, int64_t{5})) << "step " << i;
    taken += 5;
  }
  scheduler.remove(a);  // no decode left: the rest of the prompt in one step
  EXPECT_EQ(step(scheduler), std::make_pair(int64_t{0}, 40 - taken));
}

// A decode's draft runs after its token as far as the budget allows; only the draft tokens
// the step's sampling confirms count as computed.
TEST(Scheduler, ADraftRunsWithinTheBudgetAndCountsOnlyOnceConfirmed) {
  BlockManager blocks(64, 4, true);
  Scheduler scheduler(blocks, {.max_batch_tokens = 4, .max_running = 2, .max_prefill_with_decodes = 1});
  auto owned = sequence(1, 3);
  Sequence* a = owned.get();
  scheduler.enqueue(std::move(owned));
  step(scheduler);  // the prompt, and a first token
  ASSERT_EQ(a->computed, 3);
  ASSERT_EQ(a->pending(), 1);

  a->draft = {5, 6, 7, 8, 9};
  const std::vector<ScheduledSlice> plan = scheduler.plan();
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].tokens, 4);  // the decode token and 3 of the draft: the budget
  EXPECT_EQ(plan[0].drafted, 3);
  EXPECT_TRUE(plan[0].want_logits);
  EXPECT_EQ(a->draft, (std::vector<int32_t>{5, 6, 7}));
  const std::span<const int32_t> run = a->step_tokens(plan[0].tokens, plan[0].drafted);
  EXPECT_EQ(std::vector<int32_t>(run.begin(), run.end()),
            (std::vector<int32_t>{a->tokens().back(), 5, 6, 7}));
  EXPECT_GE(static_cast<int64_t>(a->table.blocks.size()) * 4, a->computed + 4);  // room for the draft's KV

  scheduler.complete(plan);
  EXPECT_EQ(a->computed, 4);  // the decode token only
  std::vector<float> logits(static_cast<size_t>(tokenizer().vocab_size()), 0.0f);
  for (int i = 0; i < 3; ++i) a->advance(logits);  // two tokens confirmed, the third not
  scheduler.accept_draft(*a, 2);
  EXPECT_EQ(a->computed, 6);
  EXPECT_EQ(a->pending(), 1);
  EXPECT_TRUE(a->draft.empty());
  EXPECT_EQ(step(scheduler), std::make_pair(int64_t{1}, int64_t{0}));  // no draft: one token
}

TEST(Scheduler, RefusesLimitsThatCannotRun) {
  BlockManager blocks(16, 4, false);
  EXPECT_THROW(Scheduler(blocks, {.max_batch_tokens = 32, .max_running = 4, .max_prefill_with_decodes = 0}),
               Error);
  EXPECT_THROW(Scheduler(blocks, {.max_batch_tokens = 2, .max_running = 4}), Error);
  EXPECT_THROW(Scheduler(blocks, {.max_batch_tokens = 32, .max_running = 0}), Error);
}

}  // namespace
}  // namespace tokenmill
