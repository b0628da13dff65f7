#include "backend/cuda/flash_attention_plan.h"

#include <algorithm>

namespace tokenmill::cuda {

std::optional<AttentionKernelMode> parse_attention_kernel_mode(const char* value) {
  const std::string_view v = value == nullptr ? std::string_view() : std::string_view(value);
  if (v.empty() || v == "auto") return AttentionKernelMode::Auto;
  if (v == "tiled") return AttentionKernelMode::Tiled;
  if (v == "rowwise") return AttentionKernelMode::Rowwise;
  return std::nullopt;
}

AttentionKernel attention_kernel_for(AttentionKernelMode mode, int64_t rows, int64_t head_dim) {
  if (head_dim > kFlashMaxHeadDim || mode == AttentionKernelMode::Rowwise) return AttentionKernel::Rowwise;
  if (mode == AttentionKernelMode::Tiled || rows >= kTiledAttentionMinRows) return AttentionKernel::Tiled;
  return AttentionKernel::Rowwise;
}

void flash_tiles_of_sequences(std::span<const Backend::PagedSequence> sequences, int64_t block_size,
                              int64_t group, PagedLayout& layout, std::vector<FlashTile>& tiles) {
  flatten_sequences(sequences, block_size, layout);
  tiles.clear();
  size_t first_row = 0;  // of the sequence in layout.rows
  for (const Backend::PagedSequence& seq : sequences) {
    if (seq.rows == 0) continue;
    const QueryRow& row = layout.rows[first_row];
    const int64_t items = seq.rows * group;
    for (int64_t first = 0; first < items; first += kFlashItemsPerTile)
      tiles.push_back(FlashTile{.q_row = row.q_row,
                                .first_pos = row.position,
                                .table = row.table,
                                .first_item = first,
                                .items = std::min<int64_t>(kFlashItemsPerTile, items - first)});
    first_row += static_cast<size_t>(seq.rows);
  }
}

}  // namespace tokenmill::cuda
