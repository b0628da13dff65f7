#include "core/arena.h"

#include <cstdlib>
#include <new>

namespace tokenmill {

void Arena::FreeAligned::operator()(std::byte* p) const { std::free(p); }

Arena::Arena(size_t capacity_bytes) : capacity_(footprint(capacity_bytes)) {
  if (capacity_ == 0) return;
  void* p = std::aligned_alloc(kAlignment, capacity_);
  if (p == nullptr) fail("out of host memory: could not allocate a {} byte arena", capacity_);
  memory_.reset(static_cast<std::byte*>(p));
}

Tensor Arena::allocate(DType dtype, std::initializer_list<int64_t> dims) {
  const uint64_t bytes = tensor_bytes(dtype, dims, "arena tensor");
  const size_t need = footprint(static_cast<size_t>(bytes));
  if (need > capacity_ - used_)
    fail("arena exhausted: {} bytes requested, {} of {} in use (internal sizing error)", need, used_,
         capacity_);
  Tensor t(memory_.get() + used_, dtype, dims);
  used_ += need;
  if (used_ > peak_) peak_ = used_;
  return t;
}

}  // namespace tokenmill
