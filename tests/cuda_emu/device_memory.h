// The emulated GPU's memory: every live allocation (device, managed and pinned host), so
// that a copy or memset can be checked against what was really allocated, and of what kind,
// before it is queued and again when it runs. Device and managed memory start as NaN bytes
// (0xff), as uninitialised memory should look to a test. Each allocation is a heap block of
// exactly its size, so AddressSanitizer sees a kernel that runs past one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace cuda_emu {

enum class MemoryKind { kDevice, kManaged, kPinnedHost };

struct Allocation {
  size_t bytes = 0;
  MemoryKind kind = MemoryKind::kDevice;
  bool pooled = false;  // from cudaMallocAsync / cudaMallocFromPoolAsync
};

class DeviceMemory {
 public:
  explicit DeviceMemory(size_t capacity) : capacity_(capacity) {}

  // Null when the device's capacity would be exceeded (cudaErrorMemoryAllocation).
  void* allocate(size_t bytes, MemoryKind kind, bool pooled);
  // "" when `memory` was the start of a live allocation of `kind` (and pooled-ness), now
  // released; else why not.
  std::string release(void* memory, MemoryKind kind, bool pooled);

  // The allocation holding [address, address + bytes), or null.
  const Allocation* holding(const void* address, size_t bytes) const;
  // True when [address, address + bytes) lies in one live device or managed allocation.
  bool on_device(const void* address, size_t bytes) const;
  // True when no byte of [address, address + bytes) is device or managed memory.
  bool on_host(const void* address, size_t bytes) const;
  bool pinned(const void* address, size_t bytes) const;

  size_t capacity() const { return capacity_; }
  // Bytes of device and managed memory in use (pinned host memory is the host's).
  size_t in_use() const { return in_use_; }
  size_t pooled_in_use() const { return pooled_in_use_; }
  size_t pooled_peak() const { return pooled_peak_; }
  void reset_pooled_peak() { pooled_peak_ = pooled_in_use_; }

 private:
  size_t capacity_;
  size_t in_use_ = 0;
  size_t pooled_in_use_ = 0;
  size_t pooled_peak_ = 0;
  std::map<uintptr_t, Allocation> live_;  // by start address
};

}  // namespace cuda_emu
