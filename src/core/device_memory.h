// DeviceMemory: where a backend's ops find their tensors. The CPU backend's is the host's own
// memory (host_memory()); a GPU backend's is device memory, which the host must never read or
// write except through copy_from_host / copy_to_host. model/ allocates its weights, caches and
// activations from the backend's DeviceMemory (through Arena and TensorStore) and moves data
// across only with these copies, so the same forward pass runs on either.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tokenmill {

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;

  // True when the host may address this memory directly (then the copies are memcpy).
  virtual bool is_host() const = 0;
  // `bytes` > 0, aligned to at least 64 bytes; throws Error when the memory is exhausted,
  // saying how much was asked.
  virtual void* allocate(size_t bytes) = 0;
  virtual void free(void* memory) noexcept = 0;
  // Copies `bytes` of host memory into this memory; `host_src` may be reused on return.
  virtual void copy_from_host(void* dst, const void* host_src, size_t bytes) = 0;
  // Copies `bytes` of this memory to the host, after every op queued before it has finished.
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  // Bytes that allocate() can still hand out now, as the operating system or the driver sees
  // it (memory the process keeps in its own caches counts as taken); Error when it cannot be
  // asked. What `tokenmill serve` sizes its KV cache from.
  virtual uint64_t available() const = 0;
};

// The host's memory: aligned_alloc (blocks of 2 MiB or more 2 MiB-aligned, on transparent
// huge pages where the kernel grants them), memcpy; available() is host_available_memory("/")
// (core/host_available_memory.h), or the kernel's count of free pages when /proc cannot be read.
DeviceMemory& host_memory();

}  // namespace tokenmill
