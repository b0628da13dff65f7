// The device-side built-ins that kernels call, for the CUDA emulation: thread coordinates,
// barriers, warp shuffles and votes, atomics, shared memory and the intrinsic math
// functions. Each is given the meaning the CUDA C++ Programming Guide gives it; where the
// GPU rounds differently (the fast approximate intrinsics), the emulation computes the
// correctly rounded result.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cuda_emu/kernel_context.h"

#define threadIdx (::cuda_emu::current("threadIdx").thread_idx)
#define blockIdx (::cuda_emu::current("blockIdx").block->block_idx)
#define blockDim (::cuda_emu::current("blockDim").block->block_dim)
#define gridDim (::cuda_emu::current("gridDim").block->grid_dim)
#define warpSize 32

namespace cuda_emu {

template <class T>
uint64_t to_bits(T value) {
  static_assert(sizeof(T) <= sizeof(uint64_t) && std::is_trivially_copyable_v<T>,
                "a warp shuffle moves a trivially copyable value of at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

template <class T>
T from_bits(uint64_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

inline int lane_id() {
  const ThreadContext& t = current("a warp function");
  const dim3& d = t.block->block_dim;
  return static_cast<int>((t.thread_idx.x + d.x * (t.thread_idx.y + d.y * t.thread_idx.z)) % 32);
}

// The lane a shuffle of `width` reads for `lane`: `target` within the lane's segment.
inline int segment_lane(int lane, int target, int width) {
  return (lane & ~(width - 1)) + (target & (width - 1));
}

// Stores `value` at `address` while `replaces(current, value)`, atomically; the value it
// found.
template <class T, class Replaces>
T atomic_replace_if(T* address, T value, Replaces replaces) {
  std::atomic_ref<T> a(*address);
  T old = a.load();
  while (replaces(old, value) && !a.compare_exchange_weak(old, value)) {
  }
  return old;
}

// Static __shared__ storage of one declaration site (rewrite_for_emulation.py passes a
// lambda, whose type is unique to the site and to the enclosing template's instantiation).
template <class T, class Site>
T& static_shared(Site) {
  static const char site = 0;
  return *static_cast<T*>(static_shared_memory(&site, sizeof(T), alignof(T)));
}

template <class T>
T* dynamic_shared() {
  return static_cast<T*>(dynamic_shared_memory());
}

}  // namespace cuda_emu

inline void __syncthreads() { ::cuda_emu::block_barrier(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::cuda_emu::warp_ballot(mask, true, "__syncwarp"); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }

template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32) {
  const int lane = ::cuda_emu::lane_id();
  return ::cuda_emu::from_bits<T>(::cuda_emu::warp_shuffle(
      mask, ::cuda_emu::to_bits(var), ::cuda_emu::segment_lane(lane, src_lane, width), "__shfl_sync"));
}

template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) {
  const int lane = ::cuda_emu::lane_id();
  return ::cuda_emu::from_bits<T>(
      ::cuda_emu::warp_shuffle(mask, ::cuda_emu::to_bits(var),
                               ::cuda_emu::segment_lane(lane, lane ^ lane_mask, width), "__shfl_xor_sync"));
}

// Up and down shuffles keep the lane's own value where the source leaves its segment.
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  const int lane = ::cuda_emu::lane_id();
  const int in_segment = (lane & (width - 1)) + static_cast<int>(delta);
  const int source = in_segment < width ? lane + static_cast<int>(delta) : lane;
  return ::cuda_emu::from_bits<T>(
      ::cuda_emu::warp_shuffle(mask, ::cuda_emu::to_bits(var), source, "__shfl_down_sync"));
}

template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  const int lane = ::cuda_emu::lane_id();
  const int in_segment = (lane & (width - 1)) - static_cast<int>(delta);
  const int source = in_segment >= 0 ? lane - static_cast<int>(delta) : lane;
  return ::cuda_emu::from_bits<T>(
      ::cuda_emu::warp_shuffle(mask, ::cuda_emu::to_bits(var), source, "__shfl_up_sync"));
}

inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return ::cuda_emu::warp_ballot(mask, predicate != 0, "__ballot_sync");
}
inline int __any_sync(unsigned mask, int predicate) {
  return ::cuda_emu::warp_ballot(mask, predicate != 0, "__any_sync") != 0;
}
inline int __all_sync(unsigned mask, int predicate) {
  return ::cuda_emu::warp_ballot(mask, predicate != 0, "__all_sync") == mask;
}

// Atomics: blocks run on several OS threads at once, so these are real atomic operations.
template <class T>
T atomicAdd(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_add(value);
}
template <class T>
T atomicExch(T* address, T value) {
  return std::atomic_ref<T>(*address).exchange(value);
}
template <class T>
T atomicCAS(T* address, T compare, T value) {
  std::atomic_ref<T>(*address).compare_exchange_strong(compare, value);
  return compare;
}
template <class T>
T atomicMax(T* address, T value) {
  return ::cuda_emu::atomic_replace_if(address, value, [](T old, T v) { return old < v; });
}
template <class T>
T atomicMin(T* address, T value) {
  return ::cuda_emu::atomic_replace_if(address, value, [](T old, T v) { return v < old; });
}

// The integer and floating min/max overloads CUDA declares for device code.
template <class T>
requires std::is_arithmetic_v<T> T min(T a, T b) { return b < a ? b : a; }
template <class T>
requires std::is_arithmetic_v<T> T max(T a, T b) { return a < b ? b : a; }

template <class T>
T __ldg(const T* address) {
  return *address;
}

// Round-to-nearest arithmetic that the GPU never fuses into an FMA (the emulated build
// contracts nothing anyway: -ffp-contract=off).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
// The GPU's approximate intrinsics; the emulation gives the correctly rounded value.
inline float __expf(float a) { return std::exp(a); }
inline float __logf(float a) { return std::log(a); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float a) { return a < 0.0f ? 0.0f : (a > 1.0f ? 1.0f : a); }
inline float rsqrtf(float a) { return 1.0f / std::sqrt(a); }
