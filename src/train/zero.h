// ZeRO stage 1 (DeepSpeed's optimizer-state partitioning) for data-parallel training over a
// Communicator: rank r of n holds the AdamW moments of part r of the flat parameter buffers
// only (n equal parts, ParameterBuffers' MomentShard{r, n}), so the optimizer state per rank
// is 1/n of DDP's. Per step, instead of summing the whole gradient on every rank:
//   reduce_scatter_gradients  rank r gets the sum over the ranks of its part of the gradients
//   AdamWOptimizer::step      the global norm from every part (one all-reduce), AdamW on its part
//   all_gather_values         every rank gets every part of the updated weights
// which moves the same bytes as an all-reduce (a reduce-scatter plus an all-gather) and
// leaves every rank with the same weights as DDP (up to the order of the norm's sum).
//
// Checkpoints hold the whole moments, as DDP's do, so a run resumes on any number of ranks,
// with or without ZeRO: at a save, gather_moments streams each rank's part to rank 0 in
// rank order (every rank takes part; rank 0 writes); at a load, every rank reads its own part
// of the file (train/checkpoint.h).
//
// Collectives work on pieces of at most bucket_bytes per rank, through a staging copy, so
// the extra memory is bounded by n x bucket_bytes, whatever the model's size. Buffers in a
// GPU's memory use the Communicator's device collectives (NCCL's reduce-scatter and
// all-gather) with the staging in that memory; without them they go through the host.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include "dist/communicator.h"
#include "train/parameters.h"

namespace tokenmill {

// This rank's part of a ZeRO-1 run.
inline MomentShard zero_shard(const Communicator& comm) { return {comm.rank(), comm.world_size()}; }

// The gradients of this rank's part := their sum over the ranks (other parts: unspecified).
void reduce_scatter_gradients(ParameterBuffers& params, Communicator& comm, int64_t bucket_bytes,
                              std::string_view what);
// Every part of the values := its owner's.
void all_gather_values(ParameterBuffers& params, Communicator& comm, int64_t bucket_bytes,
                       std::string_view what);
// Moment array `which` (0: first, 1: second) of every rank, in rank order (the whole array),
// passed to `write` in pieces where it is given; every rank calls it.
void gather_moments(const ParameterBuffers& params, Communicator& comm, int which, int64_t bucket_bytes,
                    const std::function<void(std::span<const float>)>* write);

}  // namespace tokenmill
