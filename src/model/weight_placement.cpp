#include "model/weight_placement.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

#include "core/byte_units.h"
#include "core/error.h"

namespace tokenmill {

void check_room_for(DeviceMemory& memory, uint64_t bytes, std::string_view what) {
  const uint64_t available = memory.available();
  if (bytes <= available) return;
  fail(
      "{} need {} of {} memory, but only {} is available: use a smaller model or a quantized GGUF of it "
      "(tokenmill convert or quantize --type q4_k), or free some memory",
      what, human_bytes(bytes), memory.is_host() ? "host" : "device", human_bytes(available));
}

void place_weights(ModelWeights& weights, DeviceMemory& memory) {
  if (weights.memory == &memory || memory.is_host()) return;
  if (!weights.memory->is_host()) fail("the model's weights are already on another device");
  uint64_t bytes = 0;
  std::set<const void*> seen;  // a tied matrix once
  for_each_op_weight(weights, [&](const Tensor& t) {
    if (t.data != nullptr && seen.insert(t.data).second) bytes += t.nbytes();
  });
  check_room_for(memory, bytes, "the model's weights");
  TensorStore placed(memory);
  std::map<const void*, Tensor> copies;  // by host address: a tied matrix is copied once
  for_each_op_weight(weights, [&](Tensor& t) {
    if (t.data == nullptr) return;
    auto [it, fresh] = copies.try_emplace(t.data);
    if (fresh) it->second = placed.copy_of(t);
    t = it->second;
  });
  weights.placed = std::move(placed);
  weights.memory = &memory;
}

std::vector<Tensor> mapped_op_weights(Model& model) {
  const std::vector<std::span<const std::byte>> files = model.mapped_files();
  const auto in_a_file = [&](const void* data) {
    const auto p = reinterpret_cast<uintptr_t>(data);
    return std::any_of(files.begin(), files.end(), [&](std::span<const std::byte> file) {
      const auto base = reinterpret_cast<uintptr_t>(file.data());
      return p >= base && p - base < file.size();
    });
  };
  std::vector<Tensor> mapped;
  std::set<const void*> seen;
  for_each_op_weight(model.weights, [&](Tensor& t) {
    if (t.data != nullptr && in_a_file(t.data) && seen.insert(t.data).second) mapped.push_back(t);
  });
  return mapped;
}

void copy_mapped_weights(Model& model) {
  ModelWeights& weights = model.weights;
  if (!weights.memory->is_host())
    fail("the model's weights are already on a device: only a model run on the CPU copies them to the host");
  const std::vector<Tensor> mapped = mapped_op_weights(model);
  if (mapped.empty()) return;
  uint64_t bytes = 0;
  for (const Tensor& t : mapped) bytes += t.nbytes();
  check_room_for(host_memory(), bytes, "a copy of the model's weights (--no-mmap)");
  const std::vector<Tensor> copies = weights.placed.copies_of(mapped);
  std::map<const void*, void*> copy_of;
  for (size_t i = 0; i < mapped.size(); ++i) copy_of[mapped[i].data] = copies[i].data;
  for_each_op_weight(weights, [&](Tensor& t) {
    const auto it = copy_of.find(t.data);
    if (it != copy_of.end()) t.data = it->second;
  });
}

bool weights_in(const ModelWeights& weights, const DeviceMemory& memory) {
  return weights.memory == &memory || (weights.memory->is_host() && memory.is_host());
}

}  // namespace tokenmill
