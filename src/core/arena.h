// Arena: one aligned allocation carved into tensors by bumping an offset.
//
// Buffers for a forward pass are sized once (capacity computed up front) and reused for
// every step, so the hot loop never allocates. `reset()` frees everything at once. The
// allocation comes from a DeviceMemory (host memory unless told otherwise; a GPU backend's
// device memory for the tensors its ops read), which must outlive the arena.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>

#include "core/device_memory.h"
#include "core/tensor.h"

namespace tokenmill {

class Arena {
 public:
  static constexpr size_t kAlignment = 64;  // one cache line; enough for AVX-512 loads

  explicit Arena(size_t capacity_bytes, DeviceMemory& memory = host_memory());

  // A tensor of `dims` carved from the arena; throws Error when the arena is full.
  Tensor allocate(DType dtype, std::initializer_list<int64_t> dims);
  // A tensor shaped like `like` (its data ignored).
  Tensor allocate_like(const Tensor& like);
  void reset() { used_ = 0; }

  DeviceMemory& memory() const { return *memory_.get_deleter().memory; }
  size_t capacity() const { return capacity_; }
  const std::byte* base() const { return memory_.get(); }
  size_t used() const { return used_; }
  size_t peak() const { return peak_; }

  // Bytes `allocate` would consume for a tensor of `bytes` bytes (rounded to alignment).
  static size_t footprint(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

 private:
  struct Release {
    DeviceMemory* memory;
    void operator()(std::byte* p) const { memory->free(p); }
  };
  std::byte* carve(size_t bytes);

  std::unique_ptr<std::byte, Release> memory_;
  size_t capacity_ = 0;
  size_t used_ = 0;
  size_t peak_ = 0;
};

}  // namespace tokenmill
