#include "core/tensor_store.h"

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

}  // namespace tokenmill
