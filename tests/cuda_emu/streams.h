// Streams and events of the emulated GPU. Work queued on a stream runs later, in stream
// order, when something waits for it: a synchronisation of the stream, an event recorded on
// it, the device, or a call that CUDA makes synchronous (cudaMemcpy, a copy to pageable
// host memory, cudaFree). Until then nothing has happened, so a host that reads results
// without waiting sees what was there before (NaN, for fresh memory), and a stream that uses
// another stream's results without an event between them runs before that work: the
// ordering errors a GPU shows only sometimes, the emulation shows every time.
//
// The legacy default stream (0) waits for, and is waited for by, the blocking streams;
// cudaStreamPerThread is treated as the legacy stream. Non-blocking streams order only
// through events.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

struct CUgraph_st;

// The emulated stream behind a cudaStream_t.
struct CUstream_st {
  struct Operation {
    std::string what;
    // Work of other streams that must run first: (stream, its operations up to this count).
    std::vector<std::pair<CUstream_st*, uint64_t>> after;
    // The work; "" when done, else the fault that makes the context unusable.
    std::function<std::string()> run;
  };

  unsigned flags = cudaStreamDefault;
  bool legacy = false;
  bool destroyed = false;
  CUgraph_st* capture = nullptr;  // while capturing: where enqueued work goes instead
  std::deque<Operation> pending;
  uint64_t queued = 0;  // operations ever queued
  uint64_t done = 0;    // of them, run (or dropped after a fault)
};

// A captured graph (graphs.cpp): the operations its stream's capture recorded, in order.
// Replaying runs them again with the arguments they were captured with.
struct CUgraph_st {
  std::vector<CUstream_st::Operation> operations;
  bool invalidated = false;  // a call the capture cannot record was made during it
};
struct CUgraphExec_st {
  std::vector<CUstream_st::Operation> operations;
};

// The emulated event behind a cudaEvent_t: the stream position it was last recorded at.
struct CUevent_st {
  unsigned flags = cudaEventDefault;
  CUstream_st* stream = nullptr;
  uint64_t position = 0;
  std::optional<std::chrono::steady_clock::time_point> reached;
};

namespace cuda_emu {

class Streams {
 public:
  Streams();

  // The stream a handle names (0, cudaStreamLegacy and cudaStreamPerThread: the legacy
  // stream), or null for one that is not a live stream.
  CUstream_st* resolve(cudaStream_t handle);
  CUstream_st* create(unsigned flags);
  // Runs what the stream has queued, then forgets it (it stays known as destroyed).
  void destroy(CUstream_st* stream);

  // Queues `run` on `stream`, after the work the stream must wait for by CUDA's rules; on a
  // capturing stream, appends it to the graph being captured instead.
  void enqueue(CUstream_st* stream, std::string what, std::function<std::string()> run,
               std::vector<std::pair<CUstream_st*, uint64_t>> after = {});
  // Runs `stream`'s work up to its `position`-th operation (all of it by default).
  void run_until(CUstream_st* stream, uint64_t position = UINT64_MAX);
  void run_all();

  // True while some stream captures; `invalidate_captures` spoils every capture in progress
  // (after a call a capture cannot contain, as CUDA's global capture mode does).
  bool capturing() const;
  void invalidate_captures();

  // The first fault of a queued operation ("" while none): the context is then unusable.
  const std::string& fault() const { return fault_; }
  void clear_fault() { fault_.clear(); }

 private:
  CUstream_st legacy_;
  std::deque<std::unique_ptr<CUstream_st>> created_;  // never freed: events and waits may name them
  std::unordered_set<const CUstream_st*> live_;
  std::string fault_;
};

}  // namespace cuda_emu
