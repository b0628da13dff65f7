// TensorStore: owns tensors that are made at load time (converted, transposed or split
// weights) and keeps them alive for the model's lifetime.
#pragma once

#include <initializer_list>
#include <memory>
#include <vector>

#include "core/arena.h"

namespace tokenmill {

class TensorStore {
 public:
  Tensor allocate(DType dtype, std::initializer_list<int64_t> dims);
  size_t bytes() const { return bytes_; }

 private:
  std::vector<std::unique_ptr<Arena>> blocks_;
  size_t bytes_ = 0;
};

}  // namespace tokenmill
