#include "core/tensor_store.h"

namespace tokenmill {

Tensor TensorStore::allocate(DType dtype, std::initializer_list<int64_t> dims) {
  const uint64_t bytes = tensor_bytes(dtype, dims, "stored tensor");
  blocks_.push_back(std::make_unique<Arena>(static_cast<size_t>(bytes)));
  bytes_ += blocks_.back()->capacity();
  return blocks_.back()->allocate(dtype, dims);
}

}  // namespace tokenmill
