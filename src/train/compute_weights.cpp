#include "train/compute_weights.h"

#include "core/error.h"

namespace tokenmill {

ComputeWeights::ComputeWeights(const ModelWeights& master, DType dtype, Backend& backend)
    : backend_(backend), copies_(backend.memory()), weights_(view_weights(master)) {
  if (dtype != DType::BF16 && dtype != DType::F16)
    fail("compute weights: the copy must be bf16 or f16, not {}", dtype_name(dtype));
  const auto copy = [&](const Tensor& source, Tensor& slot) {
    if (source.data == nullptr || source.dtype == dtype) return;  // absent, or already in dtype: viewed
    if (source.dtype != DType::F32 || source.rank != 2)
      fail(
          "the model's {} matrices cannot be multiplied as {} copies (only f32 ones are rounded): train with "
          "the precision of their dtype, or fp32 to multiply them as they are",
          dtype_name(source.dtype), dtype_name(dtype));
    slot = copies_.allocate(dtype, {source.rows(), source.cols()});
    rounded_.emplace_back(source, slot);
  };
  for (size_t i = 0; i < master.layers.size(); ++i) {
    const auto from = layer_matrices(master.layers[i]);
    const auto to = layer_matrices(weights_.layers[i]);
    for (size_t j = 0; j < from.size(); ++j) copy(*from[j], *to[j]);
  }
  copy(master.lm_head, weights_.lm_head);
  refresh();
}

void ComputeWeights::refresh() {
  for (const auto& [master, copy] : rounded_) backend_.convert(master, copy);
}

}  // namespace tokenmill
