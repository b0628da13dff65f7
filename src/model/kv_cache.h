// KvCache: the keys and values of one sequence, contiguous per layer.
//
// Layer l holds K and V as [capacity, n_kv_heads, head_dim] in `dtype`: f32 (rows
// [p, p + n) are exactly the output of the k/v projections for n tokens at position p, the
// forward writes them in place), or f16 (half the memory; llama.cpp's default, whose
// arithmetic the CPU attention then follows, see Backend::attention). The paged, multi-sequence cache for
// serving builds on the same addressing.
#pragma once

#include <cstdint>

#include "core/arena.h"
#include "model/model_config.h"

namespace tokenmill {

class KvCache {
 public:
  // In `memory` (the backend's whose attention reads the cache).
  KvCache(const ModelConfig& config, int64_t capacity, DType dtype = DType::F32,
          DeviceMemory& memory = host_memory());

  const Tensor& keys(int64_t layer) const { return keys_[static_cast<size_t>(layer)]; }
  const Tensor& values(int64_t layer) const { return values_[static_cast<size_t>(layer)]; }
  int64_t capacity() const { return capacity_; }
  DType dtype() const { return keys_.empty() ? DType::F32 : keys_.front().dtype; }
  size_t bytes() const { return arena_.capacity(); }

  // Host memory is committed as it is first touched; commit() touches (zeroes) it all now,
  // as llama.cpp clears its cache when made. For a cache sized to what a request will use:
  // a first touch inside a forward pass costs page faults there (in a VM, about 1 ms per
  // 2 MiB huge page: 5% of a 512-token SmolLM2 prefill's samples). No-op on a device.
  void commit();

 private:
  int64_t capacity_;
  Arena arena_;
  std::vector<Tensor> keys_, values_;
};

}  // namespace tokenmill
