// What an emulated GPU thread sees of itself and its block while it runs: the values behind
// threadIdx, blockIdx, blockDim and gridDim, and the calls through which device code reaches
// the block's scheduler (barriers, warp exchanges, shared memory, faults). kernel_runner.cpp
// sets the calling OS thread's current context each time it switches to a GPU thread.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace cuda_emu {

// The grid and block shape of the launch a block belongs to, and the block's index.
struct BlockCoordinates {
  uint3 block_idx{};
  dim3 block_dim;
  dim3 grid_dim;
};

struct ThreadContext {
  uint3 thread_idx{};
  const BlockCoordinates* block = nullptr;
};

// The running GPU thread of this OS thread (null outside a kernel).
inline thread_local ThreadContext* current_thread = nullptr;

[[noreturn]] void fault_outside_kernel(const char* what);

inline ThreadContext& current(const char* what) {
  if (current_thread == nullptr) fault_outside_kernel(what);
  return *current_thread;
}

// __syncthreads: waits until every thread of the block has arrived. A barrier that part of
// the block can never reach (a thread exited, or waits elsewhere) is a fault.
void block_barrier();

// One warp-wide exchange among the lanes of `mask` (which must hold the calling lane): each
// lane offers `bits` and receives the bits offered by lane `source` (an index within the
// warp; a source outside the mask or the warp is a fault). Every lane of the mask must make
// the same call with the same mask.
uint64_t warp_shuffle(unsigned mask, uint64_t bits, int source, const char* what);

// __ballot_sync: the mask's lanes' predicates, one bit per lane.
unsigned warp_ballot(unsigned mask, bool predicate, const char* what);

// This block's instance of the static __shared__ variable identified by `site` (bytes of it,
// NaN-filled when first reached in the block). At most 48 KiB per block.
void* static_shared_memory(const void* site, size_t bytes, size_t alignment);
// The launch's dynamic shared memory: exactly the bytes the launch asked for, NaN-filled.
void* dynamic_shared_memory();

}  // namespace cuda_emu
