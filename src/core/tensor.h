// Tensor: a non-owning, contiguous, row-major view of up to 4 dimensions.
//
// A quantized dtype (see core/dtype.h) is allowed when the last dimension is a multiple of
// its block size; the view then addresses whole rows of blocks.
//
// The owner of the memory (an Arena, an mmap'd weight file, a KV cache) outlives the
// view. Shapes are int64 and validated where the view is made; ops check the shapes
// they receive with `expect_shape`-style helpers and throw tokenmill::Error on misuse.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace tokenmill {

struct Tensor {
  static constexpr int kMaxRank = 4;

  void* data = nullptr;
  DType dtype = DType::F32;
  int rank = 0;
  std::array<int64_t, kMaxRank> shape{};

  Tensor() = default;
  Tensor(void* data_, DType dtype_, std::initializer_list<int64_t> dims);

  int64_t dim(int i) const { return shape[static_cast<size_t>(i < 0 ? rank + i : i)]; }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(rows()) * dtype_row_bytes(dtype, cols()); }
  // Rows of the last dimension: the product of all other dimensions (numel() / dim(-1)
  // when dim(-1) > 0; computed without the division so a zero last dimension is fine).
  int64_t rows() const {
    int64_t r = 1;
    for (int i = 0; i + 1 < rank; ++i) r *= shape[static_cast<size_t>(i)];
    return r;
  }
  int64_t cols() const { return rank == 0 ? 1 : shape[static_cast<size_t>(rank - 1)]; }

  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
  // The same memory seen with another shape of equal element count.
  Tensor reshaped(std::initializer_list<int64_t> dims) const;
  // Rows [begin, begin + count) along dimension 0.
  Tensor slice_rows(int64_t begin, int64_t count) const;

  std::string shape_string() const;  // e.g. "[4, 64] f32"
};

// Bytes of a tensor of `dtype` and `dims`, with overflow-checked arithmetic; Error if the
// product overflows or, for a quantized dtype, the last dimension is not a whole number
// of blocks.
uint64_t tensor_bytes(DType dtype, std::initializer_list<int64_t> dims, const char* what);

}  // namespace tokenmill
