// The emulated runtime against the CUDA Runtime API reference: queued work runs in stream
// order and only when waited for, events order streams, copies and frees are checked against
// live allocations of the right kind.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

namespace {

class Runtime : public ::testing::Test {
 protected:
  void TearDown() override { cudaDeviceReset(); }
};

TEST_F(Runtime, DescribesOneSm90Device) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(count, 1);
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  EXPECT_EQ(prop.major, 9);
  EXPECT_EQ(prop.minor, 0);
  EXPECT_EQ(prop.warpSize, 32);
  EXPECT_EQ(prop.sharedMemPerBlock, 48u * 1024);
  EXPECT_EQ(prop.sharedMemPerBlockOptin, 227u * 1024);
  EXPECT_EQ(prop.maxThreadsPerBlock, 1024);
  EXPECT_EQ(cudaSetDevice(1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // not sticky
}

TEST_F(Runtime, AsyncCopiesToPinnedMemoryLandOnlyWhenTheStreamIsWaitedFor) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  void* device = nullptr;
  int* pinned = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 64), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 64), cudaSuccess);
  std::memset(pinned, 0, 64);
  ASSERT_EQ(cudaMemsetAsync(device, 7, 64, stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(pinned, device, 64, cudaMemcpyDeviceToHost, stream), cudaSuccess);
  EXPECT_EQ(pinned[0], 0);  // not waited for: nothing has happened yet
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(pinned[0], 0x07070707);
  cudaFreeHost(pinned);
  cudaFree(device);
  cudaStreamDestroy(stream);
}

TEST_F(Runtime, PageableSourcesAreReadAtTheCallAndPageableDestinationsWaited) {
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 16), cudaSuccess);
  std::vector<int> host = {1, 2, 3, 4};
  ASSERT_EQ(cudaMemcpyAsync(device, host.data(), 16, cudaMemcpyHostToDevice, nullptr), cudaSuccess);
  host.assign(4, 0);  // CUDA staged the pageable source before returning
  std::vector<int> back(4, -1);
  ASSERT_EQ(cudaMemcpyAsync(back.data(), device, 16, cudaMemcpyDeviceToHost, nullptr), cudaSuccess);
  EXPECT_EQ(back, (std::vector<int>{1, 2, 3, 4}));  // returned when done: pageable destination
  cudaFree(device);
}

// Stream b copies what stream a writes: only an event between them orders the two.
std::vector<unsigned char> copied_across_streams(bool with_event) {
  cudaStream_t a = nullptr, b = nullptr;
  cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  cudaEvent_t written = nullptr;
  cudaEventCreateWithFlags(&written, cudaEventDisableTiming);
  void *src = nullptr, *dst = nullptr;
  cudaMalloc(&src, 8);
  cudaMalloc(&dst, 8);
  cudaMemsetAsync(src, 0x11, 8, a);
  if (with_event) {
    cudaEventRecord(written, a);
    cudaStreamWaitEvent(b, written, 0);
  }
  cudaMemcpyAsync(dst, src, 8, cudaMemcpyDeviceToDevice, b);
  cudaStreamSynchronize(b);
  std::vector<unsigned char> out(8);
  cudaMemcpy(out.data(), dst, 8, cudaMemcpyDeviceToHost);  // the legacy stream: waits for neither
  cudaDeviceSynchronize();
  cudaFree(src);
  cudaFree(dst);
  cudaEventDestroy(written);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
  return out;
}

TEST_F(Runtime, EventsOrderStreamsAndNothingElseDoes) {
  EXPECT_EQ(copied_across_streams(true), std::vector<unsigned char>(8, 0x11));
  EXPECT_EQ(copied_across_streams(false), std::vector<unsigned char>(8, 0xff));  // fresh memory: NaN bytes
}

TEST_F(Runtime, CopiesMustStayInsideLiveAllocationsOfTheRightKind) {
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 64), cudaSuccess);
  std::vector<char> host(128);
  EXPECT_EQ(cudaMemcpy(device, host.data(), 65, cudaMemcpyHostToDevice), cudaErrorInvalidValue);  // one past
  EXPECT_EQ(cudaMemcpy(host.data(), host.data() + 64, 8, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(device, host.data(), 8, cudaMemcpyDeviceToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(device, host.data(), 64, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(host.data(), 0, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(static_cast<char*>(device) + 8), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(host.data(), device, 8, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);  // freed
}

TEST_F(Runtime, WorkQueuedBehindAStreamOrderedFreeIsAFault) {
  cudaStream_t a = nullptr, b = nullptr;
  cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  void* pooled = nullptr;
  void* other = nullptr;
  ASSERT_EQ(cudaMallocAsync(&pooled, 32, a), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&other, 32), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(other, pooled, 32, cudaMemcpyDeviceToDevice, b), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(pooled, a), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(a), cudaSuccess);  // the free runs; b's copy has not
  EXPECT_EQ(cudaStreamSynchronize(b), cudaErrorLaunchFailure);
}

TEST_F(Runtime, MemoryInfoAndPoolStatisticsFollowAllocations) {
  size_t free_before = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 1 << 20), cudaSuccess);
  size_t free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_before - free_after, size_t{1} << 20);
  void* too_big = nullptr;
  EXPECT_EQ(cudaMalloc(&too_big, total), cudaErrorMemoryAllocation);
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
  void* pooled = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(&pooled, 4096, pool, nullptr), cudaSuccess);
  uint64_t used = 0;
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used), cudaSuccess);
  EXPECT_EQ(used, 4096u);
  ASSERT_EQ(cudaFreeAsync(pooled, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used), cudaSuccess);
  EXPECT_EQ(used, 0u);
  cudaFree(device);
}

TEST_F(Runtime, EventsTimeTheWorkBetweenThem) {
  cudaEvent_t start = nullptr, stop = nullptr, untimed = nullptr;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(start, nullptr), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(stop, nullptr), cudaSuccess);
  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaErrorNotReady);  // not reached yet
  ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaEventDestroy(untimed);
}

// A captured graph replays its copies with the arguments captured, reading the device
// memory as it is at each launch; capturing runs nothing.
TEST_F(Runtime, AGraphReplaysWhatItsStreamCaptured) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  int *input = nullptr, *output = nullptr, *pinned = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&input), 16), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&output), 16), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 16), cudaSuccess);
  ASSERT_EQ(cudaMemset(output, 0, 16), cudaSuccess);

  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  ASSERT_EQ(cudaStreamIsCapturing(stream, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  ASSERT_EQ(cudaMemcpyAsync(input, pinned, 16, cudaMemcpyHostToDevice, stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(output, input, 16, cudaMemcpyDeviceToDevice, stream), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

  std::vector<int> got(4);
  ASSERT_EQ(cudaMemcpy(got.data(), output, 16, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, std::vector<int>(4, 0));  // the capture ran nothing
  for (int round = 1; round <= 2; ++round) {
    for (int i = 0; i < 4; ++i) pinned[i] = 10 * round + i;
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), output, 16, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(got, (std::vector<int>{10 * round, 10 * round + 1, 10 * round + 2, 10 * round + 3}));
  }

  // Same operations, other arguments: the update takes them; other operations: refused.
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(input, pinned, 8, cudaMemcpyHostToDevice, stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(output, input, 8, cudaMemcpyDeviceToDevice, stream), cudaSuccess);
  cudaGraph_t same_shape = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &same_shape), cudaSuccess);
  cudaGraphExecUpdateResultInfo info{};
  EXPECT_EQ(cudaGraphExecUpdate(exec, same_shape, &info), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(output, 0, 8, stream), cudaSuccess);
  cudaGraph_t other = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &other), cudaSuccess);
  EXPECT_EQ(cudaGraphExecUpdate(exec, other, &info), cudaErrorGraphExecUpdateFailure);
  EXPECT_EQ(info.result, cudaGraphExecUpdateErrorTopologyChanged);

  for (cudaGraph_t g : {graph, same_shape, other}) EXPECT_EQ(cudaGraphDestroy(g), cudaSuccess);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  cudaFreeHost(pinned);
  cudaFree(input);
  cudaFree(output);
  cudaStreamDestroy(stream);
}

// What a graph cannot record refuses and spoils the capture: a synchronisation, a copy from
// pageable memory (its bytes would be those of the capture, not of the replay), an allocation.
TEST_F(Runtime, ACaptureRefusesWhatAGraphCannotReplay) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 16), cudaSuccess);
  std::vector<char> pageable(16);
  void* pooled = nullptr;
  const auto refused = [&](const std::function<cudaError_t()>& call) {
    EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    const cudaError_t status = call();
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
    EXPECT_EQ(graph, nullptr);
    return status;
  };
  EXPECT_EQ(refused([&] { return cudaStreamSynchronize(stream); }), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(refused([&] { return cudaDeviceSynchronize(); }), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(
      refused([&] { return cudaMemcpyAsync(device, pageable.data(), 16, cudaMemcpyHostToDevice, stream); }),
      cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(refused([&] { return cudaMallocAsync(&pooled, 16, stream); }), cudaErrorStreamCaptureUnsupported);
  cudaFree(device);
  cudaStreamDestroy(stream);
}

}  // namespace
