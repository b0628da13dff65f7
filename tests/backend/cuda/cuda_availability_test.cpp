// The CUDA backend on whatever this machine has: without a usable GPU (CI) it must say why
// and refuse cleanly, so the CLI can fall back to the CPU; with one (scripts/gpu-check.sh) it
// must start, name the GPU, report its free memory, and turn an impossible allocation into
// an out-of-memory Error that says what was asked and what is free.
#include <gtest/gtest.h>

#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "core/error.h"

namespace tokenmill {
namespace {

TEST(CudaAvailability, WithoutAGpuTheBackendRefusesWithTheReason) {
  const std::string why = cuda::unavailable_reason();
  if (why.empty()) GTEST_SKIP() << "a usable GPU is present";
  try {
    make_cuda_backend();
    FAIL() << "make_cuda_backend succeeded although: " << why;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

TEST(CudaAvailability, AGpuThatDoesNotExistIsNamed) {
  const std::string why = cuda::unavailable_reason(4096);
  EXPECT_FALSE(why.empty());
}

TEST(CudaAvailability, WithAGpuTheBackendStartsAndNamesIt) {
  if (!cuda::unavailable_reason().empty()) GTEST_SKIP() << cuda::unavailable_reason();
  const auto backend = make_cuda_backend();
  EXPECT_EQ(backend->name().substr(0, 7), "cuda:0 ");
}

TEST(CudaAvailability, AvailableMemoryShrinksByWhatIsAllocated) {
  if (!cuda::unavailable_reason().empty()) GTEST_SKIP() << cuda::unavailable_reason();
  const auto backend = make_cuda_backend();
  DeviceMemory& memory = backend->memory();
  constexpr uint64_t kBytes = uint64_t{512} << 20;
  const uint64_t before = memory.available();
  void* buffer = memory.allocate(kBytes);
  const uint64_t during = memory.available();
  memory.free(buffer);
  ASSERT_LT(during, before);
  EXPECT_GE(before - during, kBytes);  // the driver rounds allocations up, never down
  EXPECT_GT(memory.available(), during);
}

TEST(CudaAvailability, AnImpossibleAllocationIsAClearOutOfMemoryError) {
  if (!cuda::unavailable_reason().empty()) GTEST_SKIP() << cuda::unavailable_reason();
  cuda::CudaBackend backend(0);
  try {
    backend.pool().allocate(size_t{1} << 50, "a 1 PiB test buffer");
    FAIL() << "a 1 PiB allocation succeeded";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("out of memory"), std::string::npos) << message;
    EXPECT_NE(message.find("a 1 PiB test buffer"), std::string::npos) << message;
    EXPECT_NE(message.find("MiB free"), std::string::npos) << message;
  }
  EXPECT_EQ(backend.pool().allocate(0, "nothing").data(), nullptr);
  auto buffer = backend.pool().allocate(1 << 20, "1 MiB");
  EXPECT_GE(backend.pool().stats().allocated, uint64_t{1} << 20);
  EXPECT_GE(backend.pool().stats().peak_reserved, backend.pool().stats().allocated);
}

}  // namespace
}  // namespace tokenmill
