// Scratch: a 64-byte aligned buffer that only grows, so that after warm-up no call of the
// CPU backend allocates. Held thread_local by its users (cpu_backend.cpp, quant_matmul.cpp);
// included only by baseline (non-AVX-512) translation units.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "core/error.h"

namespace tokenmill::cpu {

class Scratch {
 public:
  // At least `count` bytes (one when count <= 0), 64-byte aligned; contents unspecified.
  void* bytes(int64_t count) {
    const auto need = static_cast<size_t>(count > 0 ? count : 1);
    if (need > capacity_) {
      const size_t rounded = (need + 63) / 64 * 64;
      void* p = std::aligned_alloc(64, rounded);
      if (p == nullptr) fail("out of host memory: CPU backend scratch of {} bytes", rounded);
      memory_.reset(static_cast<std::byte*>(p));
      capacity_ = rounded;
    }
    return memory_.get();
  }
  float* floats(int64_t count) {
    return static_cast<float*>(bytes(count * static_cast<int64_t>(sizeof(float))));
  }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> memory_;
  size_t capacity_ = 0;
};

}  // namespace tokenmill::cpu
