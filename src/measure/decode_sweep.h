// The decode phase at several batch sizes, through the serving engine's model runner
// (model/paged_transformer.h): `batch` sequences decode together, one PagedTransformer step
// per generated token for all of them, as the engine's steps do once every prompt is in.
//
// Every sequence starts from the same prompt. Its whole blocks but the last are prefilled once
// and shared by every sequence's block table (as prefix caching shares them); each sequence
// then prefills the prompt's last 1..block_size tokens into blocks of its own, in one untimed
// step for the batch (which is also the warm-up), and decodes `decode_tokens` greedy steps
// from there, timed. One pool serves the whole sweep: the shared blocks plus the private
// blocks of the largest batch; a smaller batch reuses the first of them (a position is always
// written before it is read).
//
// FLOPs per sequence: forward_flops over the decoded positions (measure/flops.h); bytes per
// step: batched_decode_bytes (measure/traffic.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "measure/bench_runner.h"
#include "measure/memory_budget.h"
#include "model/model.h"

namespace tokenmill {

inline constexpr int64_t kSweepBlockSize = 16;

// One "decode" measurement per batch size, in the order given. The prompt must leave room
// for decode_tokens in the model's context. Reserves the KV pool in `budget`. When
// `greedy_ids` is given, the greedy id each sequence feeds to each decode step is appended
// to it (batch sizes in order, then steps, then sequences): what two backends must agree on.
std::vector<PhaseMeasurement> decode_sweep(const Model& model, Backend& backend,
                                           std::span<const int32_t> prompt, int64_t decode_tokens,
                                           std::span<const int64_t> batch_sizes, MemoryBudget& budget,
                                           std::vector<int32_t>* greedy_ids = nullptr);

}  // namespace tokenmill
