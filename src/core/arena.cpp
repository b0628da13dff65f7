#include "core/arena.h"

namespace tokenmill {

Arena::Arena(size_t capacity_bytes, DeviceMemory& memory)
    : memory_(nullptr, Release{&memory}), capacity_(footprint(capacity_bytes)) {
  if (capacity_ == 0) return;
  memory_.reset(static_cast<std::byte*>(memory.allocate(capacity_)));
}

std::byte* Arena::carve(size_t bytes) {
  const size_t need = footprint(bytes);
  if (need > capacity_ - used_)
    fail("arena exhausted: {} bytes requested, {} of {} in use (internal sizing error)", need, used_,
         capacity_);
  std::byte* p = memory_.get() + used_;
  used_ += need;
  if (used_ > peak_) peak_ = used_;
  return p;
}

Tensor Arena::allocate(DType dtype, std::initializer_list<int64_t> dims) {
  Tensor t(nullptr, dtype, dims);
  t.data = carve(static_cast<size_t>(tensor_bytes(dtype, dims, "arena tensor")));
  return t;
}

Tensor Arena::allocate_like(const Tensor& like) {
  Tensor t = like;
  t.data = carve(like.nbytes());
  return t;
}

}  // namespace tokenmill
