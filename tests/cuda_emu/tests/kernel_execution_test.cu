// The emulation's kernel execution, against what the CUDA C++ Programming Guide promises:
// barriers, warp shuffles and votes, per-block shared memory, atomics, launch limits; and
// the faults that a GPU would hang on or leave undefined, reported instead.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

namespace {

// A device buffer of n values, read back after the device has finished.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) { EXPECT_EQ(cudaMalloc(&data_, n * sizeof(T)), cudaSuccess); }
  DeviceArray(const std::vector<T>& values) : DeviceArray(values.size()) {
    EXPECT_EQ(cudaMemcpy(data_, values.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return data_; }
  std::vector<T> read() const {
    std::vector<T> out(n_);
    EXPECT_EQ(cudaMemcpy(out.data(), data_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }

 private:
  size_t n_;
  T* data_ = nullptr;
};

// Each test leaves the device as it found it, faults included (a fault is sticky).
class KernelExecution : public ::testing::Test {
 protected:
  void TearDown() override { cudaDeviceReset(); }
};

__global__ void block_sum_kernel(const float* x, float* sums) {
  __shared__ float partial[256];
  const unsigned t = threadIdx.x;
  partial[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half) partial[t] += partial[t + half];
    __syncthreads();
  }
  if (t == 0) sums[blockIdx.x] = partial[0];
}

TEST_F(KernelExecution, BarriersOrderSharedMemoryWithinEachBlock) {
  std::vector<float> x(8 * 256);
  std::iota(x.begin(), x.end(), 0.0f);
  const DeviceArray<float> in(x);
  DeviceArray<float> sums(8);
  block_sum_kernel<<<8, 256>>>(in.get(), sums.get());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<float> got = sums.read();
  for (int b = 0; b < 8; ++b) EXPECT_EQ(got[b], 256.0f * 256 * b + 255.0f * 256 / 2) << "block " << b;
}

// The same reduction without the barrier after the first store: thread 0 reads partial sums
// no thread has written yet, which start as NaN in the emulation.
__global__ void unsynchronised_sum_kernel(const float* x, float* sums) {
  __shared__ float partial[64];
  const unsigned t = threadIdx.x;
  partial[t] = x[t];
  if (t == 0) {
    float s = 0;
    for (unsigned i = 0; i < blockDim.x; ++i) s += partial[i];
    sums[0] = s;
  }
}

TEST_F(KernelExecution, AMissingBarrierReadsUninitialisedSharedMemory) {
  const DeviceArray<float> in(std::vector<float>(64, 1.0f));
  DeviceArray<float> sums(1);
  unsynchronised_sum_kernel<<<1, 64>>>(in.get(), sums.get());
  EXPECT_TRUE(std::isnan(sums.read()[0]));
}

__global__ void coordinates_kernel(uint32_t* out) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  out[block * blockDim.x * blockDim.y * blockDim.z + thread] = (block << 16) | thread;
}

TEST_F(KernelExecution, EveryThreadOfEveryBlockRunsOnceWithItsCoordinates) {
  const dim3 grid(3, 2, 2), block(4, 3, 2);
  DeviceArray<uint32_t> out(12 * 24);
  coordinates_kernel<<<grid, block>>>(out.get());
  const std::vector<uint32_t> got = out.read();
  for (uint32_t b = 0; b < 12; ++b)
    for (uint32_t t = 0; t < 24; ++t) EXPECT_EQ(got[b * 24 + t], (b << 16) | t);
}

__global__ void warp_kernel(int* out) {
  const int lane = threadIdx.x % 32;
  int v = lane * 10;
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  out[threadIdx.x * 4 + 0] = v;
  out[threadIdx.x * 4 + 1] = __shfl_down_sync(0xffffffffu, lane, 3);
  out[threadIdx.x * 4 + 2] = __shfl_up_sync(0xffffffffu, lane, 5, 16);
  out[threadIdx.x * 4 + 3] = static_cast<int>(__ballot_sync(0xffffffffu, lane % 3 == 0));
}

TEST_F(KernelExecution, ShufflesAndVotesFollowTheProgrammingGuide) {
  DeviceArray<int> out(64 * 4);
  warp_kernel<<<1, 64>>>(out.get());
  const std::vector<int> got = out.read();
  unsigned ballot = 0;
  for (int l = 0; l < 32; l += 3) ballot |= 1u << l;
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32;
    EXPECT_EQ(got[t * 4 + 0], 10 * 31 * 32 / 2);
    EXPECT_EQ(got[t * 4 + 1], lane + 3 < 32 ? lane + 3 : lane);   // past the warp: its own
    EXPECT_EQ(got[t * 4 + 2], lane % 16 >= 5 ? lane - 5 : lane);  // within 16-lane segments
    EXPECT_EQ(static_cast<unsigned>(got[t * 4 + 3]), ballot);
  }
}

__global__ void atomic_kernel(unsigned long long* total, int* maximum) {
  atomicAdd(total, static_cast<unsigned long long>(blockIdx.x));
  atomicMax(maximum, static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x));
}

TEST_F(KernelExecution, AtomicsAreAtomicAcrossConcurrentBlocks) {
  DeviceArray<unsigned long long> total(std::vector<unsigned long long>{0});
  DeviceArray<int> maximum(std::vector<int>{-1});
  atomic_kernel<<<200, 64>>>(total.get(), maximum.get());
  EXPECT_EQ(total.read()[0], 64ull * 199 * 200 / 2);
  EXPECT_EQ(maximum.read()[0], 200 * 64 - 1);
}

__global__ void dynamic_shared_kernel(float* out, int n) {
  extern __shared__ float memory[];
  if (threadIdx.x == 0) {
    int nans = 0;
    for (int i = 0; i < n; ++i) nans += std::isnan(memory[i]) ? 1 : 0;
    out[0] = static_cast<float>(nans);
  }
}

TEST_F(KernelExecution, DynamicSharedMemoryIsTheSizeAskedAndStartsAsNaN) {
  DeviceArray<float> out(1);
  dynamic_shared_kernel<<<1, 32, 1000 * sizeof(float)>>>(out.get(), 1000);
  EXPECT_EQ(out.read()[0], 1000.0f);
}

TEST_F(KernelExecution, MoreThan48KiBOfDynamicSharedMemoryNeedsTheOptIn) {
  DeviceArray<float> out(1);
  constexpr int kFloats = 20000;  // 80,000 bytes
  const auto kernel = dynamic_shared_kernel;
  kernel<<<1, 32, kFloats * sizeof(float)>>>(out.get(), kFloats);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_EQ(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kFloats * sizeof(float)),
      cudaSuccess);
  kernel<<<1, 32, kFloats * sizeof(float)>>>(out.get(), kFloats);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(out.read()[0], static_cast<float>(kFloats));
  EXPECT_EQ(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024),
            cudaErrorInvalidValue);
}

__global__ void empty_kernel() {}

TEST_F(KernelExecution, InvalidLaunchConfigurationsAreRefused) {
  empty_kernel<<<1, 1025>>>();
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  empty_kernel<<<1, dim3(1, 1, 65)>>>();
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  empty_kernel<<<dim3(1, 65536), 32>>>();
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  empty_kernel<<<0, 32>>>();
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  empty_kernel<<<1, 32, 0, stream>>>();
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  empty_kernel<<<1, 1024>>>();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

__global__ void early_exit_barrier_kernel(float* out) {
  if (threadIdx.x == 0) return;
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}

TEST_F(KernelExecution, ABarrierPartOfTheBlockNeverReachesIsAFaultNotAHang) {
  DeviceArray<float> out(64);
  early_exit_barrier_kernel<<<2, 64>>>(out.get());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // the launch itself is valid
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);  // sticky
}

__global__ void divergent_barrier_kernel() {
  if (threadIdx.x < 16) __syncthreads();
  if (threadIdx.x >= 16) __shfl_xor_sync(0xffffffffu, 1, 1);
}

TEST_F(KernelExecution, ThreadsWaitingAtDifferentBarriersAreADeadlockFault) {
  divergent_barrier_kernel<<<1, 32>>>();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
}

__global__ void exited_lane_shuffle_kernel(int* out) {
  if (threadIdx.x == 5) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, static_cast<int>(threadIdx.x), 1);
}

TEST_F(KernelExecution, AShuffleNamingAnExitedLaneIsAFault) {
  DeviceArray<int> out(32);
  exited_lane_shuffle_kernel<<<1, 32>>>(out.get());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
}

__global__ void partial_warp_shuffle_kernel(int* out) {
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, static_cast<int>(threadIdx.x), 1);
}

TEST_F(KernelExecution, AFullMaskInAPartialWarpIsAFault) {
  DeviceArray<int> out(48);
  partial_warp_shuffle_kernel<<<1, 48>>>(out.get());  // the second warp has 16 lanes
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
}

__global__ void outside_mask_shuffle_kernel(int* out) {
  if (threadIdx.x < 16) out[threadIdx.x] = __shfl_xor_sync(0x0000ffffu, static_cast<int>(threadIdx.x), 16);
}

TEST_F(KernelExecution, AShuffleReadingALaneOutsideItsMaskIsAFault) {
  DeviceArray<int> out(32);
  outside_mask_shuffle_kernel<<<1, 32>>>(out.get());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
}

__global__ void too_much_static_shared_kernel(float* out) {
  __shared__ float big[13000];  // 52,000 bytes
  big[threadIdx.x] = 1.0f;
  out[0] = big[0];
}

TEST_F(KernelExecution, StaticSharedMemoryOver48KiBIsAFault) {
  DeviceArray<float> out(1);
  too_much_static_shared_kernel<<<1, 32>>>(out.get());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
}

// A kernel captured into a graph gives, at each replay, the bits of a plain launch on the
// inputs of that moment.
TEST_F(KernelExecution, AGraphReplayGivesTheBitsOfPlainLaunches) {
  std::vector<float> x(4 * 256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 1.0f / static_cast<float>(i + 1);
  const DeviceArray<float> in(x);
  DeviceArray<float> plain(4), replayed(4);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  block_sum_kernel<<<4, 256, 0, stream>>>(in.get(), replayed.get());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int round = 0; round < 2; ++round) {
    for (float& v : x) v *= -3.0f;
    ASSERT_EQ(cudaMemcpy(in.get(), x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    block_sum_kernel<<<4, 256, 0, stream>>>(in.get(), plain.get());
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const std::vector<float> want = plain.read(), got = replayed.read();
    for (size_t b = 0; b < 4; ++b)
      EXPECT_EQ(std::memcmp(&got[b], &want[b], sizeof(float)), 0) << "block " << b;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
