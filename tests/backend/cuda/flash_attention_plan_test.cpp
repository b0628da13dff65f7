// The tiled attention kernel's geometry (flash_attention_math.h, flash_attention.h) and its
// plan (flash_attention_plan.h), on the CPU: tiles cover every item of a sequence once, items
// map to their row, head and position, the key tiles reach exactly the causal diagonal, the
// shared-memory regions do not overlap and fit an sm_90 block, the paged tiles carry their
// sequence's rows and block tables, and the kernel choice follows TOKENMILL_CUDA_ATTENTION.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/flash_attention.h"
#include "backend/cuda/flash_attention_math.h"
#include "backend/cuda/flash_attention_plan.h"

namespace tokenmill::cuda {
namespace {

TEST(FlashAttentionGeometry, ContiguousTilesCoverEveryItemOnce) {
  for (const int64_t group : {1, 3, 4, 8}) {
    for (const int64_t rows : {1, 15, 16, 21, 64, 65, 300}) {
      for (const int64_t per_tile : {1, 7, 64}) {
        SCOPED_TRACE("group " + std::to_string(group) + " rows " + std::to_string(rows) + " per tile " +
                     std::to_string(per_tile));
        const FlashWork work{
            .tiles = nullptr, .rows = rows, .first_pos = 9, .tables = nullptr, .block_shift = 0};
        const int64_t tiles = flash_tile_count(rows * group, per_tile);
        int64_t next = 0;
        for (int64_t t = 0; t < tiles; ++t) {
          const FlashTile tile = flash_tile(work, group, per_tile, t);
          ASSERT_EQ(tile.first_item, next);
          ASSERT_GE(tile.items, 1);
          ASSERT_LE(tile.items, per_tile);
          EXPECT_EQ(tile.q_row, 0);
          EXPECT_EQ(tile.first_pos, 9);
          EXPECT_EQ(flash_block_table(work, tile), nullptr);
          next += tile.items;
        }
        EXPECT_EQ(next, rows * group);
      }
    }
  }
}

TEST(FlashAttentionGeometry, ItemsAreRowMajorOverTheGroupsHeads) {
  // Group of 3 (6 heads over 2 kv heads), a tile from item 4 of a sequence at q row 10, position 50.
  const FlashTile tile{.q_row = 10, .first_pos = 50, .table = 0, .first_item = 4, .items = 5};
  const std::pair<int64_t, int64_t> row_head[] = {{11, 4}, {11, 5}, {12, 3}, {12, 4}, {12, 5}};  // kv head 1
  for (int64_t m = 0; m < tile.items; ++m) {
    const FlashItem item = flash_item(tile, m, 3, 1);
    EXPECT_EQ(item.q_row, row_head[m].first) << m;
    EXPECT_EQ(item.head, row_head[m].second) << m;
    EXPECT_EQ(item.position, 50 + item.q_row - 10) << m;
  }
  EXPECT_EQ(flash_last_position(tile, 3), 52);
  EXPECT_EQ(flash_item(tile, 0, 1, 2).head, 2);  // MHA: the query head is the kv head
}

TEST(FlashAttentionGeometry, KeyTilesReachExactlyTheDiagonal) {
  for (const int keys_per_tile : {1, 5, 32}) {
    for (int64_t last = 0; last < 100; ++last) {
      const int64_t tiles = flash_key_tiles(last, keys_per_tile);
      // The last tile holds position `last`; no tile lies wholly past it.
      ASSERT_LE((tiles - 1) * keys_per_tile, last);
      ASSERT_GT(tiles * keys_per_tile, last);
      for (int64_t position = 0; position <= last; ++position) {
        int64_t seen = 0;
        for (int64_t j = 0; j < tiles; ++j) {
          const int keys = flash_keys_seen(position, j * keys_per_tile, keys_per_tile);
          ASSERT_GE(keys, 0);
          ASSERT_LE(keys, keys_per_tile);
          // Seen keys are a prefix of the tile, all at or before the position.
          if (keys > 0) {
            ASSERT_LE(j * keys_per_tile + keys - 1, position);
          }
          seen += keys;
        }
        ASSERT_EQ(seen, position + 1) << "position " << position << " last " << last;
      }
    }
  }
  EXPECT_EQ(flash_keys_seen(-1, 0, 32), 0);  // an item past the tile's end sees nothing
}

TEST(FlashAttentionGeometry, SharedRegionsAreDisjointAndFitABlock) {
  for (int64_t hd = 1; hd <= kFlashMaxHeadDim; ++hd) {
    const FlashSharedLayout s = flash_shared_layout(hd);
    ASSERT_GE(s.stride, hd);
    ASSERT_EQ(s.stride % 2, 1) << hd;
    EXPECT_EQ(s.k - s.q, kFlashItemsPerTile * s.stride);
    EXPECT_EQ(s.v - s.k, kFlashKeysPerTile * s.stride);
    EXPECT_EQ(s.w - s.v, kFlashKeysPerTile * s.stride);
    EXPECT_EQ(s.rescale - s.w, kFlashItemsPerTile * (kFlashKeysPerTile + 1));
    EXPECT_EQ(s.floats - s.rescale, kFlashItemsPerTile);
    // sm_80 / sm_90 give a block up to 163 / 227 KiB when it opts in; 48 KiB without.
    EXPECT_LE(flash_shared_bytes(hd), size_t{163} * 1024);
    if (hd <= 64) {
      EXPECT_LE(flash_shared_bytes(hd), size_t{48} * 1024);
    }
  }
  EXPECT_EQ(flash_shared_bytes(128), size_t{74752});  // (64 + 2 * 32) * 129 + 64 * 33 + 64 floats
}

TEST(FlashAttentionPlan, PagedTilesCarryTheirSequenceAndCoverItsItems) {
  const std::vector<int32_t> blocks[] = {{7, 2, 9}, {4}, {1, 3, 5, 8, 6}, {0, 10}};
  // Rows out of order in q, a sequence without rows, more than one tile of items.
  const std::vector<Backend::PagedSequence> sequences = {
      {.first_row = 40, .rows = 20, .first_pos = 3, .blocks = blocks[0]},
      {.first_row = 0, .rows = 0, .first_pos = 2, .blocks = blocks[1]},
      {.first_row = 1, .rows = 30, .first_pos = 9, .blocks = blocks[2]},
      {.first_row = 31, .rows = 1, .first_pos = 4, .blocks = blocks[3]},
  };
  const int64_t group = 4, block_size = 8;
  PagedLayout layout;
  std::vector<FlashTile> tiles = {FlashTile{}};  // reused: cleared first
  flash_tiles_of_sequences(sequences, block_size, group, layout, tiles);
  EXPECT_EQ(layout.block_shift, 3);
  size_t t = 0;
  for (const Backend::PagedSequence& seq : sequences) {
    int64_t next = 0;
    while (next < seq.rows * group) {
      ASSERT_LT(t, tiles.size());
      const FlashTile& tile = tiles[t++];
      EXPECT_EQ(tile.q_row, seq.first_row);
      EXPECT_EQ(tile.first_pos, seq.first_pos);
      EXPECT_EQ(tile.first_item, next);
      EXPECT_EQ(tile.items, std::min<int64_t>(kFlashItemsPerTile, seq.rows * group - next));
      // The tile's table is the sequence's, as far as its positions reach.
      const FlashWork work{.tiles = tiles.data(),
                           .rows = 0,
                           .first_pos = 0,
                           .tables = layout.tables.data(),
                           .block_shift = layout.block_shift};
      const int32_t* table = flash_block_table(work, tile);
      for (int64_t p = 0; p <= flash_last_position(tile, group); ++p)
        ASSERT_EQ(table[p / block_size], seq.blocks[static_cast<size_t>(p / block_size)]);
      next += tile.items;
    }
  }
  EXPECT_EQ(t, tiles.size());
}

TEST(FlashAttentionPlan, EnvironmentChoosesTheKernel) {
  EXPECT_EQ(parse_attention_kernel_mode(nullptr), AttentionKernelMode::Auto);
  EXPECT_EQ(parse_attention_kernel_mode(""), AttentionKernelMode::Auto);
  EXPECT_EQ(parse_attention_kernel_mode("auto"), AttentionKernelMode::Auto);
  EXPECT_EQ(parse_attention_kernel_mode("tiled"), AttentionKernelMode::Tiled);
  EXPECT_EQ(parse_attention_kernel_mode("rowwise"), AttentionKernelMode::Rowwise);
  for (const char* bad : {"flash", "Tiled", "tiled ", "1"})
    EXPECT_EQ(parse_attention_kernel_mode(bad), std::nullopt) << bad;

  using enum AttentionKernel;
  const auto choose = [](AttentionKernelMode mode, int64_t rows, int64_t hd) {
    return attention_kernel_for(mode, rows, hd);
  };
  EXPECT_EQ(choose(AttentionKernelMode::Auto, 1, 64), Rowwise);  // decode
  EXPECT_EQ(choose(AttentionKernelMode::Auto, kTiledAttentionMinRows - 1, 64), Rowwise);
  EXPECT_EQ(choose(AttentionKernelMode::Auto, kTiledAttentionMinRows, 64), Tiled);
  EXPECT_EQ(choose(AttentionKernelMode::Auto, 512, 128), Tiled);
  EXPECT_EQ(choose(AttentionKernelMode::Auto, 512, 129), Rowwise);  // past the tiled kernel's head dim
  EXPECT_EQ(choose(AttentionKernelMode::Tiled, 1, 17), Tiled);
  EXPECT_EQ(choose(AttentionKernelMode::Tiled, 1, 256), Rowwise);
  EXPECT_EQ(choose(AttentionKernelMode::Rowwise, 512, 64), Rowwise);
}

}  // namespace
}  // namespace tokenmill::cuda
