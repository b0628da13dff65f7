// The host side of add_lora's addressing (lora_kernels.h): a call's segments (tensors in
// device memory) as the table one upload copies to the device.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/lora_kernels.h"

namespace tokenmill::cuda {

struct LoraTable {
  std::vector<LoraSegmentEntry> segments;  // one per segment, in order
  int64_t covered_rows = 0;                // rows the segments cover
  int64_t t_floats = 0;                    // the intermediates of all of them (rank floats a row)
};

// Fills `table` (reusing its memory) from checked segments (checks::check_add_lora).
void lora_table(std::span<const Backend::LoraSegment> segments, LoraTable& table);

}  // namespace tokenmill::cuda
