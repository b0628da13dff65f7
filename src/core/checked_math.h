// Overflow-checked size arithmetic for parsers and allocators.
//
// Every size or offset computed from untrusted input (file headers, configs, flags)
// goes through these helpers; on overflow they throw tokenmill::Error naming `what`.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "core/error.h"

namespace tokenmill {

inline uint64_t checked_add(uint64_t a, uint64_t b, std::string_view what) {
  uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) fail("{}: size overflows 64 bits ({} + {})", what, a, b);
  return r;
}

inline uint64_t checked_mul(uint64_t a, uint64_t b, std::string_view what) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) fail("{}: size overflows 64 bits ({} * {})", what, a, b);
  return r;
}

// Product of dimensions; every dimension must be >= 0.
inline uint64_t checked_product(std::initializer_list<int64_t> dims, std::string_view what) {
  uint64_t r = 1;
  for (int64_t d : dims) {
    if (d < 0) fail("{}: negative dimension {}", what, d);
    r = checked_mul(r, static_cast<uint64_t>(d), what);
  }
  return r;
}

// Narrows a 64-bit count to int64 (the engine's index type), refusing values >= 2^63.
inline int64_t checked_to_int64(uint64_t v, std::string_view what) {
  if (v > static_cast<uint64_t>(INT64_MAX)) fail("{}: value {} does not fit in int64", what, v);
  return static_cast<int64_t>(v);
}

}  // namespace tokenmill
