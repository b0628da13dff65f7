// How finely the CPU backend splits work across threads (core/parallel.h chunks).
#pragma once

#include <cstdint>

namespace tokenmill::cpu {

inline constexpr int64_t kMinElementwiseWork = 32 * 1024;  // elements per thread
inline constexpr int64_t kMinMatmulWork = 64 * 1024;       // multiply-adds per thread
// Element-wise chunks start on 64-byte lines of f32 (no line written by two threads).
inline constexpr int64_t kElementAlign = 16;

// Decode GEMVs stream their weights, and two threads' shares of the memory bandwidth change
// from moment to moment: split statically, each waited ~6% of a region for the other. The
// last 1/kGemvSharedTailDivisor of the rows goes in chunks of about kGemvTailChunkBytes of
// weights to whichever thread is free (parallel_for_shared_tail); smaller chunks cost more
// in restarted streams than they save.
inline constexpr int64_t kGemvSharedTailDivisor = 5;
inline constexpr int64_t kGemvTailChunkBytes = 128 * 1024;

// Grain (in items of `work_per_item` units) so a chunk holds at least ~`min_work` units:
// tiny ops stay on one thread instead of paying for a parallel region.
inline int64_t grain_for(int64_t work_per_item, int64_t min_work, int64_t multiple = 1) {
  const int64_t per = work_per_item > 0 ? work_per_item : 1;
  int64_t g = (min_work + per - 1) / per;
  if (g < 1) g = 1;
  return (g + multiple - 1) / multiple * multiple;
}

}  // namespace tokenmill::cpu
