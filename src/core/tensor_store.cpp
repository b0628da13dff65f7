#include "core/tensor_store.h"

#include <cstdint>

#include "core/checked_math.h"

namespace tokenmill {

Tensor TensorStore::allocate(DType dtype, std::initializer_list<int64_t> dims) {
  const uint64_t bytes = tensor_bytes(dtype, dims, "stored tensor");
  blocks_.push_back(std::make_unique<Arena>(static_cast<size_t>(bytes), *memory_));
  bytes_ += blocks_.back()->capacity();
  return blocks_.back()->allocate(dtype, dims);
}

Tensor TensorStore::copy_of(const Tensor& host) {
  blocks_.push_back(std::make_unique<Arena>(host.nbytes(), *memory_));
  bytes_ += blocks_.back()->capacity();
  const Tensor copy = blocks_.back()->allocate_like(host);
  memory_->copy_from_host(copy.data, host.data, host.nbytes());
  return copy;
}

std::vector<Tensor> TensorStore::copies_of(const std::vector<Tensor>& hosts) {
  size_t bytes = 0;
  for (const Tensor& host : hosts)
    bytes = checked_add(bytes, Arena::footprint(host.nbytes()), "stored tensors");
  if (bytes == 0) return hosts;  // nothing to copy: empty tensors are their own copies
  std::vector<Tensor> copies;
  blocks_.push_back(std::make_unique<Arena>(bytes, *memory_));
  bytes_ += blocks_.back()->capacity();
  for (const Tensor& host : hosts) {
    copies.push_back(blocks_.back()->allocate_like(host));
    memory_->copy_from_host(copies.back().data, host.data, host.nbytes());
  }
  return copies;
}

bool TensorStore::owns(const void* address) const {
  const auto p = reinterpret_cast<uintptr_t>(address);
  for (const auto& block : blocks_) {
    const auto base = reinterpret_cast<uintptr_t>(block->base());
    if (p >= base && p - base < block->capacity()) return true;
  }
  return false;
}

}  // namespace tokenmill
