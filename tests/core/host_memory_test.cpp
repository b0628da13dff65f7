// host_memory(): blocks aligned for SIMD loads, and huge-page aligned from 2 MiB up (so
// transparent huge pages can back them whole); every byte usable.
#include <cstdint>
#include <cstring>

#include <gtest/gtest.h>

#include "core/device_memory.h"

namespace tokenmill {
namespace {

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

TEST(HostMemory, SmallBlocksAreCacheLineAligned) {
  for (const size_t bytes : {size_t{1}, size_t{100}, size_t{4096}, (size_t{2} << 20) - 1}) {
    void* p = host_memory().allocate(bytes);
    EXPECT_EQ(address(p) % 64, 0u) << bytes;
    std::memset(p, 0x5a, bytes);
    host_memory().free(p);
  }
}

TEST(HostMemory, LargeBlocksAreHugePageAligned) {
  for (const size_t bytes : {size_t{2} << 20, (size_t{2} << 20) + 1, size_t{5} << 20}) {
    auto* p = static_cast<unsigned char*>(host_memory().allocate(bytes));
    EXPECT_EQ(address(p) % (size_t{2} << 20), 0u) << bytes;
    std::memset(p, 0x5a, bytes);
    EXPECT_EQ(p[bytes - 1], 0x5a);
    host_memory().free(p);
  }
}

}  // namespace
}  // namespace tokenmill
