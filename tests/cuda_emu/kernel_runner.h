// Runs one kernel grid on the CPU: blocks are spread over a few OS threads (workers), and
// the threads of a block run as fibres of one worker, with __syncthreads, warp exchanges
// and per-block shared memory behaving as on a GPU. What a GPU would leave undefined or
// hang on (a barrier part of a block can never reach, a shuffle naming a lane that left or
// is outside its mask, more static shared memory than a block has) ends the grid with a
// fault instead.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <string>

#include "cuda_emu/launch.h"

namespace cuda_emu {

// The emulated device's limits (cudaGetDeviceProperties reports the same).
inline constexpr int kMaxThreadsPerBlock = 1024;
inline constexpr size_t kStaticSharedLimit = 48 * 1024;     // per block, without opt-in
inline constexpr size_t kOptInSharedLimit = 227 * 1024;     // per block, after cudaFuncSetAttribute
inline constexpr size_t kGpuThreadStackBytes = 256 * 1024;  // each GPU thread's (fibre's) stack

struct Grid {
  LaunchSite site;
  dim3 grid;
  dim3 block;
  size_t dynamic_shared_bytes = 0;
  std::function<void()> thread_body;
};

// Runs every block of `grid`; "" when it completed, else what went wrong (the first fault).
std::string run_grid(const Grid& grid);

}  // namespace cuda_emu
