// Launcher of Backend::add_lora's kernels (lora_kernels.cu), and the addressing they share
// with the host: the rows the segments cover are numbered in order over the whole call
// (covered row c), and one table of segments (lora_plan.h builds it) says where each covered
// row sits in x and y and where its rank-long intermediate t sits in a scratch buffer.
// Two launches serve all segments: shrink (t = x . a^T: a warp per element of t, lanes over
// k, a fixed butterfly), then expand (y += t . b^T: a thread per element of y over t staged in
// shared memory). Each element's arithmetic depends only on its own inputs: deterministic.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/linear_plan.h"
#include "core/host_device.h"

namespace tokenmill::cuda {

// Backend::kMaxLoraRank (backend.h is not for .cu files): a block of the expand kernel stages
// one row's t in shared memory.
inline constexpr int64_t kLoraMaxRank = 1024;
inline constexpr int kLoraThreads = 256;
inline constexpr int kLoraWarps = kLoraThreads / 32;

// One segment of the table: rows [first_row, first_row + rows) of x and y, which are covered
// rows [first_covered, first_covered + rows) of the call; their intermediates start at float
// first_t of the scratch buffer, rank floats a row. a [rank, k], b [m, rank] in device memory.
struct LoraSegmentEntry {
  int64_t first_row = 0, rows = 0, rank = 0, first_covered = 0, first_t = 0;
  const float* a = nullptr;
  const float* b = nullptr;
};

// The segment of covered row c: the last of `count` (>= 1, ascending first_covered, the
// first at 0) that starts at or before c.
TM_HOST_DEVICE int64_t lora_segment_of(const LoraSegmentEntry* segments, int64_t count, int64_t c) {
  int64_t lo = 0, hi = count;  // segments[lo] starts at or before c; the answer is below hi
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (segments[mid].first_covered <= c) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Covered row c of segment s: its row of x and y, and where its intermediate starts.
TM_HOST_DEVICE int64_t lora_row(const LoraSegmentEntry& s, int64_t c) {
  return s.first_row + (c - s.first_covered);
}
TM_HOST_DEVICE int64_t lora_first_t(const LoraSegmentEntry& s, int64_t c) {
  return s.first_t + (c - s.first_covered) * s.rank;
}

// Shrink: a block per covered row (y; blocks stride past kMaxGridY), its warps over the
// elements of t, enough blocks along x that one pass covers the largest rank.
inline Grid lora_shrink_grid(int64_t covered_rows, int64_t max_rank) {
  return Grid{.x = std::max<int64_t>(1, (max_rank + kLoraWarps - 1) / kLoraWarps),
              .y = std::clamp<int64_t>(covered_rows, 1, kMaxGridY)};
}
// Expand: a block per covered row (y) and kLoraThreads columns of y (x; blocks stride past kMaxGridX).
inline Grid lora_expand_grid(int64_t covered_rows, int64_t m) {
  return Grid{.x = std::clamp<int64_t>((m + kLoraThreads - 1) / kLoraThreads, 1, kMaxGridX),
              .y = std::clamp<int64_t>(covered_rows, 1, kMaxGridY)};
}

// For every covered row c < covered_rows (segments: `segment_count` entries in device
// memory), with s its segment and r = lora_row(s, c):
//   t[lora_first_t(s, c) + j] = x[r, :] . s.a[j, :]   (j < s.rank; an f32 sum)
//   y[r, :] += t[lora_first_t(s, c) ...] . s.b^T
// x [.., k], y [.., m]; t holds the last segment's first_t + rows * rank floats.
void launch_add_lora(const LoraSegmentEntry* segments, int64_t segment_count, int64_t covered_rows,
                     int64_t max_rank, const float* x, int64_t k, float* t, float* y, int64_t m,
                     cudaStream_t stream);

}  // namespace tokenmill::cuda
