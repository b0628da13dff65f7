#include "core/device_memory.h"

#include <sys/sysinfo.h>

#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/host_available_memory.h"

namespace tokenmill {

namespace {

class HostMemory final : public DeviceMemory {
 public:
  static constexpr size_t kAlignment = 64;  // one cache line; enough for AVX-512 loads

  bool is_host() const override { return true; }
  void* allocate(size_t bytes) override {
    void* p = std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
    if (p == nullptr) fail("out of host memory: could not allocate {} bytes", bytes);
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
