// Backend::add_lora on the CPU: several low-rank adapters over one batch, each on its own
// segment of rows, in one parallel pass over all the rows the segments cover. Both steps of a
// row are the decode GEMV of kernels.h (x . a^T: rank dot products of length k; then
// t . b^T: m of length rank), over up to kGemvMaxTokens consecutive rows of one segment at a
// time, so a thread's rows share each read of a and b.
#pragma once

#include <cstdint>
#include <span>

#include "backend/cpu/kernels.h"

namespace tokenmill::cpu {

// One segment of add_lora: rows [first_row, first_row + rows), a [rank, k], b [m, rank].
struct LoraRows {
  int64_t first_row = 0, rows = 0, rank = 0;
  const float* a = nullptr;
  const float* b = nullptr;
};

// The shape-checked arguments (checks::check_add_lora): x [n, k] and y [n, m] f32, the
// segments in ascending row order without overlap, covering `covered_rows` rows with
// `multiply_adds` multiply-adds in all, and ranks of at most `max_rank`.
struct LoraArgs {
  const float* x = nullptr;
  float* y = nullptr;
  int64_t k = 0, m = 0, covered_rows = 0, max_rank = 0, multiply_adds = 0;
  std::span<const LoraRows> segments;
};

// y[r, :] += (x[r, :] . a^T) . b^T on every segment's rows; the rank-long intermediate is
// summed in f32. A row's result depends on nothing but its own inputs (not on the thread
// split, nor on the other rows of the call).
void add_lora(const KernelTable& kernels, const LoraArgs& args);

}  // namespace tokenmill::cpu
