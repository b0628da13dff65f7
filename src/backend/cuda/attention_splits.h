// Split-K for the row-wise attention kernel (attention_kernels.h): a query row that attends to
// many positions is cut into position ranges ("splits") that separate thread blocks walk, so
// a decode step of a few sequences over a long context fills the GPU instead of one block per
// head. The split of a row depends on its own position count only, never on the launch, so a
// row's result is the same bits in any batch, contiguous or paged.
//
// A row of `positions` positions [0, positions):
//   splits = 1                                     if positions <= kSplitPositions
//          = min(ceil(positions / kSplitPositions), kMaxSplits)  otherwise
//   split s covers [s * length, min((s + 1) * length, positions)), length = ceil(positions / splits)
// Every split is non-empty. Rows of one split run as before; rows of several run three passes:
// each split's softmax state; the row's state (the splits' states merged in split order),
// then each split's sum of probability * value; the splits' sums added in split order.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/host_device.h"

namespace tokenmill::cuda {

inline constexpr int64_t kSplitPositions = 512;
inline constexpr int64_t kMaxSplits = 32;

TM_HOST_DEVICE int64_t attention_splits(int64_t positions) {
  if (positions <= kSplitPositions) return 1;
  const int64_t splits = (positions + kSplitPositions - 1) / kSplitPositions;
  return splits < kMaxSplits ? splits : kMaxSplits;
}

// The positions a query at `position` attends to: position + 1, or its last `window` (> 0)
// positions (Backend::AttentionScores). A row's splits are of these, from its first.
TM_HOST_DEVICE int64_t attended_positions(int64_t position, int64_t window) {
  return window > 0 && position + 1 > window ? window : position + 1;
}

struct PositionRange {
  int64_t begin = 0, end = 0;
};

// Split s (< attention_splits(positions)) of a row of `positions` positions.
TM_HOST_DEVICE PositionRange split_range(int64_t positions, int64_t s) {
  const int64_t splits = attention_splits(positions);
  const int64_t length = (positions + splits - 1) / splits;
  const int64_t begin = s * length, end = begin + length;
  return {begin, end < positions ? end : positions};
}

// How a launch runs its rows: the most splits of any of its rows (1: no row splits, and the
// split passes are skipped), whether every row splits (then the one-split kernel is skipped),
// and its rows taken `rows_per_chunk` at a time so that the split passes' scratch (per row,
// head and split: a softmax state and a head row of sums) stays within kSplitScratchBytes (at
// least one row per chunk).
inline constexpr size_t kSplitScratchBytes = size_t{64} << 20;

struct SplitPlan {
  int64_t max_splits = 1;
  bool every_row_splits = false;
  int64_t rows_per_chunk = 0;
  size_t scratch_bytes = 0;  // for one chunk
};

// For `rows` work rows attending to `min_positions` ... `max_positions` positions;
// `state_bytes` is the size of one softmax state.
inline SplitPlan split_plan(int64_t rows, int64_t heads, int64_t head_dim, int64_t min_positions,
                            int64_t max_positions, size_t state_bytes) {
  SplitPlan plan;
  plan.max_splits = attention_splits(max_positions);
  if (plan.max_splits == 1 || rows == 0) return plan;
  plan.every_row_splits = attention_splits(min_positions) > 1;
  const size_t per_row = static_cast<size_t>(heads * plan.max_splits) *
                         (state_bytes + static_cast<size_t>(head_dim) * sizeof(float));
  plan.rows_per_chunk = std::clamp<int64_t>(static_cast<int64_t>(kSplitScratchBytes / per_row), 1, rows);
  plan.scratch_bytes = per_row * static_cast<size_t>(plan.rows_per_chunk);
  return plan;
}

}  // namespace tokenmill::cuda
