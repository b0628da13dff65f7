// The CUDA backend's DeviceCollectives (dist/device_collectives.h): NCCL over the GPUs of a
// data-parallel job, one per rank. The NCCL id is made by rank 0 and broadcast over the
// job's Communicator (MPI), as llm.c and PyTorch bootstrap NCCL; every collective is queued
// on the backend's stream (after the backward that produced the gradients) and waited for by
// polling the stream against the timeout. In the cuda-emu build, NCCL itself is emulated over
// MPI (tests/cuda_emu/nccl.cpp). Needs no CUDA header.
#pragma once

#include <memory>

#include "backend/backend.h"
#include "dist/communicator.h"
#include "dist/device_collectives.h"

namespace tokenmill::cuda {

// Error if `backend` is not the CUDA backend or NCCL cannot start; every rank must call it.
std::unique_ptr<DeviceCollectives> make_nccl_collectives(Backend& backend, Communicator& comm,
                                                         double timeout_seconds);

}  // namespace tokenmill::cuda
