#include "backend/cuda/paged_layout.h"

#include <bit>

namespace tokenmill::cuda {

void flatten_sequences(std::span<const Backend::PagedSequence> sequences, int64_t block_size,
                       PagedLayout& layout) {
  layout.rows.clear();
  layout.tables.clear();
  layout.block_shift = std::countr_zero(static_cast<uint64_t>(block_size));
  for (const Backend::PagedSequence& seq : sequences) {
    if (seq.rows == 0) continue;
    const auto table = static_cast<int64_t>(layout.tables.size());
    const int64_t used = (seq.first_pos + seq.rows + block_size - 1) / block_size;
    layout.tables.insert(layout.tables.end(), seq.blocks.begin(), seq.blocks.begin() + used);
    for (int64_t t = 0; t < seq.rows; ++t)
      layout.rows.push_back(
          QueryRow{.q_row = seq.first_row + t, .position = seq.first_pos + t, .table = table});
  }
}

}  // namespace tokenmill::cuda
