// Data parallelism over a Communicator (dist/communicator.h) for the training loop: every
// rank holds the whole model and its AdamW state (DDP), computes the gradients of its own
// share of the step's micro-batches, and the ranks sum them before the optimizer step.
//
// The sum, not the mean: each micro-batch's loss enters with its share of the whole global
// step's scored targets (train/step_batch.h), so the sum over the ranks is the gradient of
// the global batch's mean loss, exactly as one process with grad_accum x ranks micro-batches
// computes it (up to the order of the float additions).
//
// After the sum every rank holds the same gradients, so the global-norm clipping, the fp16
// loss scaler's skip decision and the AdamW update are the same on every rank without
// further communication, and the weights stay identical (check_replicas_agree verifies it).
//
// Buckets: the flat gradient buffer is summed in pieces of `bucket_bytes` (PyTorch DDP's
// bucket_cap_mb, 25 MiB by default): one collective per piece. Buffers in a GPU's memory go
// through the Communicator's device collectives (NCCL) when attached, else through a bounded
// staging copy summed on the host over MPI. The sum runs after the backward, not overlapped
// with it.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "dist/communicator.h"
#include "train/parameters.h"

namespace tokenmill {

// The Communicator's device collectives (NCCL) for buffers in params' memory: null when they
// are in host memory or none are attached (then collectives go through the host).
DeviceCollectives* device_collectives_for(const ParameterBuffers& params, const Communicator& comm);

// params' gradients := their sum over the ranks (nothing in a world of one).
void sum_gradients(ParameterBuffers& params, Communicator& comm, int64_t bucket_bytes, std::string_view what);

// Throws Error on every rank unless every rank's weights (params.values()) are the same
// bytes as rank 0's (an FNV-1a hash of them, compared): the replicas must never drift apart
// silently. Checked before each checkpoint.
void check_replicas_agree(const ParameterBuffers& params, Communicator& comm, std::string_view what);

// `buffer` (one of params' four) := root's (rank 0's) buffer, in pieces of bucket_bytes.
void broadcast_from_root(ParameterBuffers& params, std::span<float> buffer, Communicator& comm,
                         int64_t bucket_bytes, std::string_view what);

}  // namespace tokenmill
