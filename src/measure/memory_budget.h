// MemoryBudget: the bytes a bench run may still allocate, checked before each large buffer
// (weights, KV pools, training state) so that a run that cannot fit is refused with what it
// needs and what is left, instead of being killed by the kernel halfway.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/byte_units.h"

namespace tokenmill {

class MemoryBudget {
 public:
  explicit MemoryBudget(uint64_t limit_bytes) : left_(limit_bytes) {}

  bool fits(uint64_t bytes) const { return bytes <= left_; }
  // Takes `bytes` for `what` ("the f32 weights of smollm2-135m"); Error saying how much is
  // needed and how much is left, and `remedy` (which flags to change), when they do not fit.
  void reserve(uint64_t bytes, std::string_view what, std::string_view remedy);
  void release(uint64_t bytes) { left_ += bytes; }
  uint64_t left() const { return left_; }

 private:
  uint64_t left_;
};

}  // namespace tokenmill
