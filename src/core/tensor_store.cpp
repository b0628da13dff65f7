#include "core/tensor_store.h"

#include "core/checked_math.h"

namespace tokenmill {

Tensor TensorStore::allocate(DType dtype, std::initializer_list<int64_t> dims) {
  const uint64_t bytes =
      checked_mul(checked_product(dims, "stored tensor"), dtype_size(dtype), "stored tensor");
  blocks_.push_back(std::make_unique<Arena>(static_cast<size_t>(bytes)));
  bytes_ += blocks_.back()->capacity();
  return blocks_.back()->allocate(dtype, dims);
}

}  // namespace tokenmill
