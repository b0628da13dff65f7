// The tile geometry and per-row math of the tiled ("flash") attention kernel
// (flash_attention.cu), TM_HOST_DEVICE so that the CPU tests run the same recurrence
// (tests/backend/cuda/flash_attention_test.cpp).
//
// Items. A launch serves sequences of consecutive query rows; the query vectors of one kv
// head's group (the `group` = heads / kv_heads query heads that read it) are the sequence's
// items, row-major: item i is query row i / group, query head kv * group + i % group. A tile
// is a run of consecutive items of one sequence; one thread block serves a tile and one kv
// head, so every key/value tile it loads serves up to a tile's worth of query vectors.
//
// Keys. Key tile j holds positions [j * keys_per_tile, (j + 1) * keys_per_tile): tile bounds
// are absolute positions, and an item sees only the keys at or before its own position. So
// the arithmetic of an item depends on its own query, position and keys, never on which
// other items share its tile: the same bits in any batch, paged or contiguous.
//
// Per row (the flash-attention recurrence, f32): for each key tile, in order, with the
// tile's scores s_k (k < the row's keys in the tile):
//   max' = max(max, max_k s_k),  rescale = exp(max - max'),  w_k = exp(s_k - max'),
//   sum' = sum * rescale + sum_k w_k (k in order),  acc' = acc * rescale + sum_k w_k v_k;
// then out = acc / sum. With an f16 cache the weights must be the f16-rounded softmax
// probabilities (Backend::attention), which need the final max and sum: a first walk over the
// key tiles runs the same recurrence for max and sum only, a second uses
// w_k = f16(exp(s_k - max) / sum) with rescale 1, and out = acc.
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/cuda/attention_math.h"
#include "core/host_device.h"

namespace tokenmill::cuda {

// A run of `items` consecutive items of one sequence, from item `first_item`. The sequence's
// row t is row q_row + t of q and out and sits at position first_pos + t; `table` is where
// its block table starts in FlashWork::tables (paged).
struct FlashTile {
  int64_t q_row = 0;
  int64_t first_pos = 0;
  int64_t table = 0;
  int64_t first_item = 0;
  int64_t items = 0;
};

// The tiles of one launch. Contiguous: tiles == nullptr, one sequence of `rows` rows at
// positions first_pos..., cut into tiles of items_per_tile items, caches addressed by
// position. Paged: tiles[i] (device memory), block tables at `tables` (device memory), as
// paged_addressing.h.
struct FlashWork {
  const FlashTile* tiles = nullptr;
  int64_t rows = 0;
  int64_t first_pos = 0;
  const int32_t* tables = nullptr;
  int block_shift = 0;  // log2(block_size)
};

// Tiles of `items_per_tile` items that cover `items` items (the last one may be shorter).
TM_HOST_DEVICE int64_t flash_tile_count(int64_t items, int64_t items_per_tile) {
  return (items + items_per_tile - 1) / items_per_tile;
}

// Tile `index` of `work` (index < the launch's tile count).
TM_HOST_DEVICE FlashTile flash_tile(const FlashWork& work, int64_t group, int64_t items_per_tile,
                                    int64_t index) {
  if (work.tiles != nullptr) return work.tiles[index];
  const int64_t first = index * items_per_tile, total = work.rows * group;
  const int64_t items = total - first < items_per_tile ? total - first : items_per_tile;
  return FlashTile{0, work.first_pos, 0, first, items};
}

// The block table of `tile` (null: contiguous).
TM_HOST_DEVICE const int32_t* flash_block_table(const FlashWork& work, const FlashTile& tile) {
  return work.tiles == nullptr ? nullptr : work.tables + tile.table;
}

// Item m of a tile (m < tile.items) for kv head `kv_head`: its row of q and out, its query
// head and its position.
struct FlashItem {
  int64_t q_row;
  int64_t head;
  int64_t position;
};
TM_HOST_DEVICE FlashItem flash_item(const FlashTile& tile, int64_t m, int64_t group, int64_t kv_head) {
  const int64_t i = tile.first_item + m, t = i / group;
  return FlashItem{tile.q_row + t, kv_head * group + i % group, tile.first_pos + t};
}

// The position of the tile's last item: the last key any of its items sees.
TM_HOST_DEVICE int64_t flash_last_position(const FlashTile& tile, int64_t group) {
  return tile.first_pos + (tile.first_item + tile.items - 1) / group;
}

// Key tiles at or below the causal diagonal of a tile whose last position is `last_position`.
TM_HOST_DEVICE int64_t flash_key_tiles(int64_t last_position, int64_t keys_per_tile) {
  return last_position / keys_per_tile + 1;
}

// The keys of the key tile that starts at `key_start` at or before `position`: 0 past the
// diagonal, keys_per_tile below it.
TM_HOST_DEVICE int flash_keys_seen(int64_t position, int64_t key_start, int keys_per_tile) {
  const int64_t seen = position - key_start + 1;
  return static_cast<int>(seen < 0 ? 0 : seen < keys_per_tile ? seen : keys_per_tile);
}

// One step of a row's recurrence over the scores s[0, keys) of a key tile: updates the row's
// max and sum, overwrites s[k] with the weight exp(s[k] - new max) and returns the factor that
// rescales the row's earlier output. No keys: nothing changes, factor 1 (exactly what a tile
// the row does not see at all would do).
TM_HOST_DEVICE float flash_softmax_step(SoftmaxState& state, float* s, int keys) {
  if (keys <= 0) return 1.0f;
  float tile_max = s[0];
  for (int k = 1; k < keys; ++k) tile_max = fmaxf(tile_max, s[k]);
  const float max = fmaxf(state.max, tile_max);
  const float rescale = expf(state.max - max);  // 0 on the first tile (max was -inf)
  float tile_sum = 0.0f;
  for (int k = 0; k < keys; ++k) {
    s[k] = expf(s[k] - max);
    tile_sum += s[k];
  }
  state = SoftmaxState{max, state.sum * rescale + tile_sum};
  return rescale;
}

// The second walk of the f16 rule: overwrites s[k] (k < keys) with the probability of score
// s[k] given the row's final state `all`, rounded to f16 (cache_operand).
TM_HOST_DEVICE void flash_f16_probabilities(float* s, int keys, SoftmaxState all) {
  for (int k = 0; k < keys; ++k) s[k] = cache_operand(softmax_probability(s[k], all), true);
}

// An output element from its accumulator and its row's final sum: acc / sum, or acc itself
// when the weights were already probabilities (the f16 rule).
TM_HOST_DEVICE float flash_output(float acc, float sum, bool weights_are_probabilities) {
  return weights_are_probabilities ? acc : acc / sum;
}

}  // namespace tokenmill::cuda
