// How the CUDA attention kernel finds its rows (paged_addressing.h, paged_layout.h), run on
// the CPU: every query row of a flattened continuous batch reads, position by position, the
// pool slot Backend::paged_attention defines (block blocks[p / block_size], row
// p % block_size), for odd positions, block sizes from 1 to 64 and shuffled tables; a
// contiguous launch reads row p; and the launch geometry covers any number of work items.
#include "backend/cuda/paged_addressing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/paged_layout.h"

namespace tokenmill::cuda {
namespace {

TEST(PagedAddressing, ContiguousWorkRowsAreQueryRowsAtConsecutivePositions) {
  const AttentionWork work{.rows = nullptr, .first_pos = 37, .tables = nullptr, .block_shift = 0};
  for (const int64_t i : {0, 1, 5, 1000}) {
    const QueryRow row = query_row(work, i);
    EXPECT_EQ(row.q_row, i);
    EXPECT_EQ(row.position, 37 + i);
    EXPECT_EQ(block_table(work, row), nullptr);
  }
  for (const int64_t p : {int64_t{0}, int64_t{1}, int64_t{63}, int64_t{64}, int64_t{4097}, int64_t{1} << 33})
    EXPECT_EQ(cache_row(nullptr, 4, p), p);
}

TEST(PagedAddressing, CacheRowIsTheBlockRowOfThePosition) {
  std::mt19937_64 rng(7);
  for (int shift = 0; shift <= 6; ++shift) {
    const int64_t block_size = int64_t{1} << shift;
    SCOPED_TRACE("block_size " + std::to_string(block_size));
    std::vector<int32_t> table(13);
    std::iota(table.begin(), table.end(), 1000);
    std::shuffle(table.begin(), table.end(), rng);
    for (int64_t p = 0; p < static_cast<int64_t>(table.size()) * block_size; ++p)
      ASSERT_EQ(cache_row(table.data(), shift, p),
                int64_t{table[static_cast<size_t>(p / block_size)]} * block_size + p % block_size)
          << "position " << p;
  }
  // Block ids near the int32 limit: slots past 2^31 stay exact.
  const int32_t far[] = {2147483000};
  EXPECT_EQ(cache_row(far, 4, 11), int64_t{2147483000} * 16 + 11);
}

TEST(PagedAddressing, FlattenedBatchReadsEachSequencesSlots) {
  struct Shape {
    int64_t first_row, rows, first_pos, spare_blocks;  // spare: table entries past the last position
  };
  // Rows out of order in q, a sequence without rows, a first_pos on a block boundary and odd
  // ones, tables longer than needed.
  const std::vector<Shape> shapes = {
      {9, 1, 37, 2}, {0, 5, 0, 0}, {20, 0, 5, 1}, {5, 3, 16, 0}, {12, 7, 13, 3}};
  std::mt19937_64 rng(11);
  for (const int64_t block_size : {1, 4, 16}) {
    SCOPED_TRACE("block_size " + std::to_string(block_size));
    std::vector<int32_t> ids(400);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    std::vector<std::vector<int32_t>> tables;
    size_t next = 0;
    for (const Shape& s : shapes) {
      const int64_t blocks = (s.first_pos + s.rows + block_size - 1) / block_size + s.spare_blocks;
      tables.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(next),
                          ids.begin() + static_cast<std::ptrdiff_t>(next + static_cast<size_t>(blocks)));
      next += static_cast<size_t>(blocks);
    }
    std::vector<Backend::PagedSequence> sequences;
    for (size_t s = 0; s < shapes.size(); ++s)
      sequences.push_back({shapes[s].first_row, shapes[s].rows, shapes[s].first_pos, tables[s]});

    PagedLayout layout;
    layout.rows.resize(3);  // stale content from an earlier batch
    layout.tables.assign(5, -1);
    flatten_sequences(sequences, block_size, layout);
    EXPECT_EQ(int64_t{1} << layout.block_shift, block_size);
    const AttentionWork work{.rows = layout.rows.data(),
                             .first_pos = 0,
                             .tables = layout.tables.data(),
                             .block_shift = layout.block_shift};
    size_t i = 0, used_blocks = 0;
    for (const Backend::PagedSequence& seq : sequences) {
      if (seq.rows > 0)
        used_blocks += static_cast<size_t>((seq.first_pos + seq.rows + block_size - 1) / block_size);
      for (int64_t t = 0; t < seq.rows; ++t, ++i) {
        ASSERT_LT(i, layout.rows.size());
        const QueryRow row = query_row(work, static_cast<int64_t>(i));
        EXPECT_EQ(row.q_row, seq.first_row + t);
        EXPECT_EQ(row.position, seq.first_pos + t);
        const int32_t* table = block_table(work, row);
        for (int64_t p = 0; p <= row.position; ++p)
          ASSERT_EQ(cache_row(table, layout.block_shift, p),
                    int64_t{seq.blocks[static_cast<size_t>(p / block_size)]} * block_size + p % block_size)
              << "sequence row " << t << " position " << p;
      }
    }
    EXPECT_EQ(i, layout.rows.size());
    EXPECT_EQ(layout.tables.size(), used_blocks);  // only the blocks positions use
  }
}

TEST(PagedAddressing, EmptyBatchHasNoWork) {
  PagedLayout layout;
  const std::vector<int32_t> table = {3};
  const std::vector<Backend::PagedSequence> none = {{0, 0, 0, table}};
  flatten_sequences(none, 8, layout);
  EXPECT_TRUE(layout.rows.empty());
  EXPECT_TRUE(layout.tables.empty());
}

TEST(AttentionGeometry, BlocksCoverEveryWorkItemUpToTheCap) {
  EXPECT_EQ(attention_blocks(0), 0);
  EXPECT_EQ(attention_blocks(1), 1);
  EXPECT_EQ(attention_blocks(4097 * 32), 4097 * 32);
  EXPECT_EQ(attention_blocks(kMaxAttentionBlocks), kMaxAttentionBlocks);
  EXPECT_EQ(attention_blocks(int64_t{1} << 40), kMaxAttentionBlocks);  // the blocks stride over the rest
}

}  // namespace
}  // namespace tokenmill::cuda
