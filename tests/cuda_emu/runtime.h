// The emulated CUDA runtime's state: one device (GPU 0), its memory, streams and events, the
// per-thread last error and the sticky fault that ends a context. Every API call takes the
// runtime's lock; queued work runs under it too, on the thread that waits for it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <unordered_set>

#include "cuda_emu/device_memory.h"
#include "cuda_emu/streams.h"

namespace cuda_emu {

// The emulated device: sm_90 with an H100's limits, and TOKENMILL_CUDA_EMU_MEMORY bytes of
// memory (default 8 GiB: the emulated device's memory is the host's).
inline constexpr int kComputeMajor = 9;
inline constexpr int kComputeMinor = 0;
inline constexpr int kMultiprocessors = 132;
inline constexpr const char* kDeviceName = "tokenmill CUDA emulator (sm_90 on the CPU)";

struct Runtime {
  std::recursive_mutex mutex;
  DeviceMemory memory;
  Streams streams;
  std::unordered_set<CUevent_st*> events;
  std::map<const void*, size_t> dynamic_shared_opt_in;  // cudaFuncSetAttribute, per kernel
  std::unordered_set<CUgraph_st*> graphs;
  std::unordered_set<CUgraphExec_st*> graph_execs;
  uint64_t pool_release_threshold = 0;

  Runtime();
};

// The process's runtime (never destroyed: other statics may call CUDA at exit).
Runtime& runtime();

using Lock = std::lock_guard<std::recursive_mutex>;

// What every call returns: the context's sticky fault first, then `status` (kept as the
// calling thread's last error when it is one).
cudaError_t answer(cudaError_t status);
// A refused call: `status`, and why on stderr.
cudaError_t refuse(cudaError_t status, const std::string& why);

}  // namespace cuda_emu
