#include "model/kv_cache.h"

#include <cstring>

#include "core/checked_math.h"

namespace tokenmill {

namespace {
size_t cache_bytes(const ModelConfig& c, int64_t capacity, DType dtype) {
  const uint64_t one = checked_mul(checked_product({capacity, c.num_key_value_heads, c.head_dim}, "KV cache"),
                                   dtype_size(dtype), "KV cache");
  return static_cast<size_t>(checked_mul(Arena::footprint(static_cast<size_t>(one)),
                                         2 * static_cast<uint64_t>(c.num_hidden_layers), "KV cache"));
}
}  // namespace

KvCache::KvCache(const ModelConfig& config, int64_t capacity, DType dtype, DeviceMemory& memory)
    : capacity_(capacity), arena_(cache_bytes(config, capacity, dtype), memory) {
  if (dtype != DType::F32 && dtype != DType::F16)
    fail("KV cache: dtype {} is not supported (f32, f16)", dtype_name(dtype));
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    keys_.push_back(arena_.allocate(dtype, {capacity, config.num_key_value_heads, config.head_dim}));
    values_.push_back(arena_.allocate(dtype, {capacity, config.num_key_value_heads, config.head_dim}));
  }
}

void KvCache::commit() {
  if (!arena_.memory().is_host()) return;
  for (const std::vector<Tensor>* tensors : {&keys_, &values_})
    for (const Tensor& t : *tensors) std::memset(t.data, 0, t.nbytes());
}

}  // namespace tokenmill
