#include "core/device_memory.h"

#include <sys/mman.h>
#include <sys/sysinfo.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/host_available_memory.h"

namespace tokenmill {

namespace {

class HostMemory final : public DeviceMemory {
 public:
  static constexpr size_t kAlignment = 64;  // one cache line; enough for AVX-512 loads
  static constexpr size_t kHugePage = size_t{2} << 20;

  bool is_host() const override { return true; }
  // Blocks of a huge page or more are huge-page aligned and asked for transparent huge pages
  // (kernels set to THP "madvise" give them only when asked): streaming reads of weights or
  // caches then cross no 4 KiB page boundary, where the hardware prefetchers stop. Measured
  // on a 2-core Xeon VM, 256 MiB read by 2 threads, 4 KiB -> 2 MiB pages: one plain stream
  // per thread 21 -> 26 GB/s, measure/stream_read.h's kernel 33 -> 36-40 GB/s, the bf16
  // decode GEMV (bench_kernels, cold) 21-25 -> 27-32 GB/s. The cost: a block's last huge
  // page is committed whole once touched (up to 2 MiB more per block), and a first touch
  // may wait for the kernel to compact memory. The advice is a hint: where the kernel
  // refuses it, the memory is the same, only read more slowly.
  void* allocate(size_t bytes) override {
    const size_t alignment = bytes >= kHugePage ? kHugePage : kAlignment;
    if (bytes > SIZE_MAX - alignment) fail("out of host memory: cannot allocate {} bytes", bytes);
    const size_t size = (bytes + alignment - 1) / alignment * alignment;
    void* p = std::aligned_alloc(alignment, size);
    if (p == nullptr) fail("out of host memory: could not allocate {} bytes", bytes);
    if (alignment == kHugePage) ::madvise(p, size, MADV_HUGEPAGE);
    return p;
  }
  void free(void* memory) noexcept override { std::free(memory); }
  void copy_from_host(void* dst, const void* host_src, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, host_src, bytes);
  }
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(host_dst, src, bytes);
  }
  uint64_t available() const override {
    if (const std::optional<uint64_t> bytes = host_available_memory("/")) return *bytes;
    struct sysinfo info {};
    if (sysinfo(&info) != 0)
      fail("cannot tell how much host memory is free: /proc and sysinfo() both failed");
    return static_cast<uint64_t>(info.freeram) * info.mem_unit;
  }
};

}  // namespace

DeviceMemory& host_memory() {
  static HostMemory memory;
  return memory;
}

}  // namespace tokenmill
