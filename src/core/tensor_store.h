// TensorStore: owns tensors that are made at load time (converted, transposed or split
// weights, or weights copied to a GPU) and keeps them alive for the model's lifetime.
#pragma once

#include <initializer_list>
#include <memory>
#include <vector>

#include "core/arena.h"

namespace tokenmill {

class TensorStore {
 public:
  // Tensors in `memory` (which must outlive the store).
  explicit TensorStore(DeviceMemory& memory = host_memory()) : memory_(&memory) {}

  Tensor allocate(DType dtype, std::initializer_list<int64_t> dims);
  // A copy of host tensor `host` in this store's memory.
  Tensor copy_of(const Tensor& host);
  // Copies of host tensors `hosts`, in order, all in one block of this store's memory (in
  // host memory, a block of 2 MiB or more lies on transparent huge pages; see host_memory()).
  // When they hold no bytes at all, `hosts` themselves.
  std::vector<Tensor> copies_of(const std::vector<Tensor>& hosts);
  // True when `address` lies in one of this store's blocks (its tensors, and the padding
  // that aligns each).
  bool owns(const void* address) const;
  size_t bytes() const { return bytes_; }

 private:
  DeviceMemory* memory_;
  std::vector<std::unique_ptr<Arena>> blocks_;
  size_t bytes_ = 0;
};

}  // namespace tokenmill
