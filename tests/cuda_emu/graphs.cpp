// CUDA graphs by stream capture, on the emulated device: between cudaStreamBeginCapture and
// cudaStreamEndCapture a stream records its work instead of queueing it (streams.cpp); an
// instantiated graph replays that work, in order, with the arguments it was captured with,
// each time it is launched. What a capture cannot record (a call that waits for the device,
// a copy from or to pageable host memory, stream-ordered allocation, a wait on another
// stream's event) refuses and invalidates the capture, so code meant for graphs must keep
// its inputs in device or pinned memory at fixed addresses, as on a GPU.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <string>
#include <utility>

#include "cuda_emu/runtime.h"

using cuda_emu::answer;
using cuda_emu::Lock;
using cuda_emu::refuse;
using cuda_emu::runtime;

extern "C" {

cudaError_t cudaStreamBeginCapture(cudaStream_t handle, cudaStreamCaptureMode) {
  const Lock lock(runtime().mutex);
  CUstream_st* stream = runtime().streams.resolve(handle);
  if (stream == nullptr)
    return refuse(cudaErrorInvalidResourceHandle, "cudaStreamBeginCapture: not a live stream");
  if (stream->legacy)
    return refuse(cudaErrorStreamCaptureUnsupported,
                  "cudaStreamBeginCapture: the legacy stream cannot capture");
  if (stream->capture != nullptr)
    return refuse(cudaErrorIllegalState, "cudaStreamBeginCapture: the stream is already capturing");
  stream->capture = new CUgraph_st;
  return answer(cudaSuccess);
}

cudaError_t cudaStreamEndCapture(cudaStream_t handle, cudaGraph_t* graph) {
  const Lock lock(runtime().mutex);
  CUstream_st* stream = runtime().streams.resolve(handle);
  if (stream == nullptr || stream->capture == nullptr)
    return refuse(cudaErrorIllegalState, "cudaStreamEndCapture: the stream is not capturing");
  CUgraph_st* captured = std::exchange(stream->capture, nullptr);
  if (captured->invalidated) {
    delete captured;
    *graph = nullptr;
    return refuse(cudaErrorStreamCaptureInvalidated, "cudaStreamEndCapture: the capture was invalidated");
  }
  runtime().graphs.insert(captured);
  *graph = captured;
  return answer(cudaSuccess);
}

cudaError_t cudaStreamIsCapturing(cudaStream_t handle, cudaStreamCaptureStatus* status) {
  const Lock lock(runtime().mutex);
  const CUstream_st* stream = runtime().streams.resolve(handle);
  if (stream == nullptr)
    return refuse(cudaErrorInvalidResourceHandle, "cudaStreamIsCapturing: not a live stream");
  *status = stream->capture == nullptr     ? cudaStreamCaptureStatusNone
            : stream->capture->invalidated ? cudaStreamCaptureStatusInvalidated
                                           : cudaStreamCaptureStatusActive;
  return answer(cudaSuccess);
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  const Lock lock(runtime().mutex);
  if (runtime().graphs.erase(graph) == 0)
    return refuse(cudaErrorInvalidValue, "cudaGraphDestroy: not a live graph");
  delete graph;
  return answer(cudaSuccess);
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  const Lock lock(runtime().mutex);
  if (!runtime().graphs.contains(graph))
    return refuse(cudaErrorInvalidValue, "cudaGraphInstantiate: not a live graph");
  *exec = new CUgraphExec_st{graph->operations};
  runtime().graph_execs.insert(*exec);
  return answer(cudaSuccess);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  const Lock lock(runtime().mutex);
  if (runtime().graph_execs.erase(exec) == 0)
    return refuse(cudaErrorInvalidValue, "cudaGraphExecDestroy: not a live executable graph");
  delete exec;
  return answer(cudaSuccess);
}

// The update takes `graph`'s work when it is the same sequence of operations (kernels from
// the same launch sites, the same kinds of copies) with other arguments.
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph,
                                cudaGraphExecUpdateResultInfo* info) {
  const Lock lock(runtime().mutex);
  if (!runtime().graph_execs.contains(exec) || !runtime().graphs.contains(graph))
    return refuse(cudaErrorInvalidValue, "cudaGraphExecUpdate: not a live graph and executable graph");
  *info = cudaGraphExecUpdateResultInfo{};
  bool same = exec->operations.size() == graph->operations.size();
  for (size_t i = 0; same && i < graph->operations.size(); ++i)
    same = exec->operations[i].what == graph->operations[i].what;
  if (!same) {
    info->result = cudaGraphExecUpdateErrorTopologyChanged;
    return refuse(cudaErrorGraphExecUpdateFailure, "cudaGraphExecUpdate: the graph's operations changed");
  }
  exec->operations = graph->operations;
  info->result = cudaGraphExecUpdateSuccess;
  return answer(cudaSuccess);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t handle) {
  const Lock lock(runtime().mutex);
  CUstream_st* stream = runtime().streams.resolve(handle);
  if (stream == nullptr || !runtime().graph_execs.contains(exec))
    return refuse(cudaErrorInvalidResourceHandle, "cudaGraphLaunch: not a live executable graph and stream");
  runtime().streams.enqueue(stream, fmt::format("graph of {} operations", exec->operations.size()),
                            [operations = exec->operations]() -> std::string {
                              for (const CUstream_st::Operation& op : operations)
                                if (std::string fault = op.run(); !fault.empty())
                                  return op.what + ": " + fault;
                              return "";
                            });
  return answer(cudaSuccess);
}

}  // extern "C"
