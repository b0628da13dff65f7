// Which attention kernel serves a sequence of query rows, and the tiles of the tiled kernel
// for a continuous batch (host side of flash_attention.h).
//
// Kernels. The row-wise kernel (attention_kernels.h) gives each (query row, head) a block
// that walks all its keys; the tiled kernel (flash_attention.h) loads each key/value tile
// once for up to kFlashItemsPerTile query vectors of a kv head's group. The environment
// variable TOKENMILL_CUDA_ATTENTION chooses:
//   unset, "" or "auto": the tiled kernel for sequences of at least kTiledAttentionMinRows
//                        query rows (prefill, training forward), the row-wise one below
//                        (decode: its 8 warps split the keys of a single row);
//   "tiled":             the tiled kernel for every sequence;
//   "rowwise":           the row-wise kernel for every sequence (the reference path);
// any other value is an Error. Either way head_dim > kFlashMaxHeadDim goes row-wise, and so
// do sliding windows and soft-capped scores (the tiled kernel scores with a plain scale).
// The choice is per sequence, from its row count and head_dim only: paged_attention() picks
// for each sequence what attention() over a contiguous cache picks for it, so the two stay
// equal bit for bit whatever else is in the batch.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/flash_attention.h"
#include "backend/cuda/paged_layout.h"

namespace tokenmill::cuda {

inline constexpr const char* kAttentionKernelVariable = "TOKENMILL_CUDA_ATTENTION";
inline constexpr int64_t kTiledAttentionMinRows = 16;

enum class AttentionKernelMode { Auto, Tiled, Rowwise };
enum class AttentionKernel { Tiled, Rowwise };

// The mode a value of TOKENMILL_CUDA_ATTENTION asks for (null: unset); nullopt when the value
// is none of those above.
std::optional<AttentionKernelMode> parse_attention_kernel_mode(const char* value);

// The kernel for a sequence of `rows` query rows with heads of `head_dim` elements.
AttentionKernel attention_kernel_for(AttentionKernelMode mode, int64_t rows, int64_t head_dim);

// The tiles of `sequences` (checked: checks::check_paged_attention) for the tiled kernel with
// `group` query heads per kv head, over pools of `block_size` positions per block: their
// block tables into `layout` (flatten_sequences), one FlashTile per kFlashItemsPerTile items
// of each sequence into `tiles`. Both reuse their memory.
void flash_tiles_of_sequences(std::span<const Backend::PagedSequence> sequences, int64_t block_size,
                              int64_t group, PagedLayout& layout, std::vector<FlashTile>& tiles);

}  // namespace tokenmill::cuda
