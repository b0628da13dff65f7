// The host side of paged attention's addressing (paged_addressing.h): a continuous batch's
// sequences (host spans) flattened into the arrays a launch copies to the device.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/paged_addressing.h"

namespace tokenmill::cuda {

struct PagedLayout {
  std::vector<QueryRow> rows;   // one per owned query row: sequences in order, then rows in order
  std::vector<int32_t> tables;  // each sequence's blocks of positions [0, first_pos + rows), in order
  int block_shift = 0;          // log2(block_size)
};

// Fills `layout` (reusing its memory) from checked sequences (checks::check_paged_attention)
// over pools of `block_size` positions per block (a power of two). Sequences without rows
// add nothing.
void flatten_sequences(std::span<const Backend::PagedSequence> sequences, int64_t block_size,
                       PagedLayout& layout);

}  // namespace tokenmill::cuda
