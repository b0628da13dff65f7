#include "cuda_emu/device_memory.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

namespace cuda_emu {

namespace {

constexpr size_t kAlignment = 256;  // cudaMalloc's guarantee
constexpr unsigned char kUninitialisedByte = 0xff;

const char* kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kDevice: return "device memory";
    case MemoryKind::kManaged: return "managed memory";
    case MemoryKind::kPinnedHost: return "pinned host memory";
  }
  return "memory";
}

}  // namespace

void* DeviceMemory::allocate(size_t bytes, MemoryKind kind, bool pooled) {
  const bool device = kind != MemoryKind::kPinnedHost;
  if (device && bytes > capacity_ - in_use_) return nullptr;
  void* memory = nullptr;
  if (posix_memalign(&memory, kAlignment, bytes == 0 ? 1 : bytes) != 0) return nullptr;
  if (device) {
    std::memset(memory, kUninitialisedByte, bytes);
    in_use_ += bytes;
  }
  if (pooled) {
    pooled_in_use_ += bytes;
    if (pooled_in_use_ > pooled_peak_) pooled_peak_ = pooled_in_use_;
  }
  live_[reinterpret_cast<uintptr_t>(memory)] = Allocation{bytes, kind, pooled};
  return memory;
}

std::string DeviceMemory::release(void* memory, MemoryKind kind, bool pooled) {
  const auto it = live_.find(reinterpret_cast<uintptr_t>(memory));
  if (it == live_.end()) return fmt::format("{} is not the start of a live allocation", memory);
  const Allocation a = it->second;
  if (a.kind != kind && !(kind == MemoryKind::kDevice && a.kind == MemoryKind::kManaged))
    return fmt::format("{} is {}, not {}", memory, kind_name(a.kind), kind_name(kind));
  if (a.pooled != pooled)
    return fmt::format("{} came from {}: free it with {}", memory, a.pooled ? "a memory pool" : "cudaMalloc",
                       a.pooled ? "cudaFreeAsync" : "cudaFree");
  live_.erase(it);
  if (a.kind != MemoryKind::kPinnedHost) in_use_ -= a.bytes;
  if (a.pooled) pooled_in_use_ -= a.bytes;
  std::free(memory);
  return "";
}

const Allocation* DeviceMemory::holding(const void* address, size_t bytes) const {
  const auto at = reinterpret_cast<uintptr_t>(address);
  auto it = live_.upper_bound(at);
  if (it == live_.begin()) return nullptr;
  --it;
  const uintptr_t start = it->first;
  const size_t size = it->second.bytes;
  if (at - start > size || bytes > size - (at - start)) return nullptr;
  return &it->second;
}

bool DeviceMemory::on_device(const void* address, size_t bytes) const {
  const Allocation* a = holding(address, bytes);
  return a != nullptr && a->kind != MemoryKind::kPinnedHost;
}

bool DeviceMemory::on_host(const void* address, size_t bytes) const {
  const auto start = reinterpret_cast<uintptr_t>(address);
  auto it = live_.lower_bound(start);
  if (it != live_.end() && it->second.kind != MemoryKind::kPinnedHost && it->first < start + bytes)
    return false;
  if (it == live_.begin()) return true;
  --it;
  return it->second.kind == MemoryKind::kPinnedHost || it->first + it->second.bytes <= start;
}

bool DeviceMemory::pinned(const void* address, size_t bytes) const {
  const Allocation* a = holding(address, bytes);
  return a != nullptr && a->kind == MemoryKind::kPinnedHost;
}

}  // namespace cuda_emu
