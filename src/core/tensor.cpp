#include "core/tensor.h"

#include "core/checked_math.h"

namespace tokenmill {

Tensor::Tensor(void* data_, DType dtype_, std::initializer_list<int64_t> dims) : data(data_), dtype(dtype_) {
  if (dims.size() > static_cast<size_t>(kMaxRank)) fail("tensor rank {} exceeds {}", dims.size(), kMaxRank);
  tensor_bytes(dtype, dims, "tensor shape");
  for (int64_t d : dims) shape[static_cast<size_t>(rank++)] = d;
}

uint64_t tensor_bytes(DType dtype, std::initializer_list<int64_t> dims, const char* what) {
  const uint64_t count = checked_product(dims, what);
  const int64_t block = dtype_block_size(dtype);
  const int64_t last = dims.size() == 0 ? 1 : *(dims.end() - 1);
  if (last % block != 0)
    fail("{}: a {} row of {} elements is not a whole number of {}-element blocks", what, dtype_name(dtype),
         last, block);
  return checked_mul(count / static_cast<uint64_t>(block), dtype_block_bytes(dtype), what);
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[static_cast<size_t>(i)];
  return n;
}

Tensor Tensor::reshaped(std::initializer_list<int64_t> dims) const {
  Tensor t(data, dtype, dims);
  if (t.numel() != numel()) fail("cannot reshape {} to {}", shape_string(), t.shape_string());
  return t;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t count) const {
  if (rank == 0 || begin < 0 || count < 0 || begin + count > shape[0])
    fail("row slice [{}, {}) out of range for {}", begin, begin + count, shape_string());
  Tensor t = *this;
  t.shape[0] = count;
  const size_t row_bytes = shape[0] == 0 ? 0 : nbytes() / static_cast<size_t>(shape[0]);
  t.data = static_cast<char*>(data) + static_cast<size_t>(begin) * row_bytes;
  return t;
}

std::string Tensor::shape_string() const {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) s += fmt::format("{}{}", i ? ", " : "", shape[static_cast<size_t>(i)]);
  return s + "] " + std::string(dtype_name(dtype));
}

}  // namespace tokenmill
