// Speculative decoding with a draft model: a smaller model with the target's tokenizer
// guesses each decoding sequence's next tokens, greedily, and the engine checks them as it
// checks any draft (serve/engine.h): the output stays the target's.
//
// The draft keeps its own KV pool with as many blocks of the same size as the target's, and
// reads and writes it through the target's block tables, so its blocks come and go with the
// target's (preemption, prefix sharing, sliding-window release). A sequence's draft KV is
// valid for positions [0, Sequence::draft_computed); it is caught up when the sequence
// decodes: one draft step runs every decoding sequence's tokens from draft_computed through
// its last one (the prompt, the first time) and guesses the first token from the last row,
// then each further step runs the previous guess. The KV of a guess that step ran counts once
// the guess is confirmed (Sequence::draft_kv_ahead, Scheduler::accept_draft); positions of
// refused guesses are recomputed on the next catch-up. A block a prefix shares with another
// sequence may get its draft KV rewritten for the same tokens (the same values), though not
// twice in one step: a sequence whose catch-up would write a block another one's writes in
// the same step waits for the next.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "model/paged_transformer.h"
#include "runtime/text_model.h"
#include "serve/block_manager.h"
#include "serve/sequence.h"

namespace tokenmill {

class DraftModel {
 public:
  // `draft` (weights in `backend`'s memory) for a target of `target_vocab` token ids (the
  // ids a guess may take) and a pool of `num_blocks` x `block_size`; steps of up to
  // `max_tokens` tokens over up to `max_slices` sequences, positions below `context`.
  // Throws Error if the draft's tokenizer is not the target's (vocabulary size and every
  // end-of-sequence id) or its context is shorter.
  DraftModel(const TextModel& draft, const TextModel& target, Backend& backend, int64_t num_blocks,
             int64_t block_size, int64_t max_tokens, int64_t max_slices, int64_t context);

  // Sets the draft of each sequence of `decoding` (each has pending() == 1) to up to
  // `max_tokens` greedy guesses, `total` at most for all of them (the first sequences first),
  // fewer where it may generate fewer tokens (room() - 1) or its KV blocks for them cannot be
  // reserved in `blocks`; none while its catch-up does not fit in one step (it goes on in
  // the next).
  void propose(std::span<Sequence* const> decoding, int64_t max_tokens, int64_t total, BlockManager& blocks);

  uint64_t pool_bytes() const { return runner_.pool_bytes(); }

 private:
  int64_t vocab_limit_;  // guesses are ids below it
  int64_t max_tokens_;   // per draft step
  PagedTransformer runner_;
  std::vector<PagedTransformer::Slice> slices_;
  std::vector<std::pair<Sequence*, int64_t>> caught_up_;  // tokens each slice runs
  std::vector<Sequence*> guessing_;
  std::vector<int64_t> wanted_;  // guesses per sequence of guessing_
  std::vector<bool> claimed_;    // by block id: written by this step's catch-ups

  // Claims the blocks of s's next `tokens` catch-up positions for this step; false (claiming
  // nothing) when another catch-up of the step writes one of them.
  bool claim_blocks(const Sequence& s, int64_t tokens);
};

}  // namespace tokenmill
