// The layer kernels' launch geometry (layer_geometry.h) on odd sizes: every element, row and
// (row, column) of a norm's parameter gradient is covered exactly once, within CUDA's limits.
#include "backend/cuda/layer_geometry.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace tokenmill::cuda {
namespace {

const int64_t kOddSizes[] = {0, 1, 7, 31, 33, 255, 257, 1001, 4099, 70001, 1000003};

TEST(LayerGeometry, ElementwiseGridStrideCoversEveryElementOnce) {
  for (const int64_t count : kOddSizes) {
    const int64_t blocks = elementwise_blocks(count);
    EXPECT_EQ(blocks == 0, count == 0) << count;
    EXPECT_LE(blocks, kMaxElementwiseBlocks);
    EXPECT_LE(blocks * kElementwiseThreads, count + kElementwiseThreads - 1) << "no idle blocks";
    // Walk the grid stride as for_each_element does.
    std::vector<int> hits(static_cast<size_t>(count), 0);
    const int64_t stride = blocks * kElementwiseThreads;
    for (int64_t thread = 0; thread < stride; ++thread)
      for (int64_t i = thread; i < count; i += stride) ++hits[static_cast<size_t>(i)];
    for (int64_t i = 0; i < count; ++i)
      ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << count << " element " << i;
  }
  // Past the cap, the grid stays capped and the stride loop does the rest.
  EXPECT_EQ(elementwise_blocks(int64_t{1} << 40), kMaxElementwiseBlocks);
}

TEST(LayerGeometry, RowThreadsAreWholeWarpsAndCoverShortRows) {
  for (const int64_t d : kOddSizes) {
    const int threads = row_threads(d);
    EXPECT_EQ(threads % 32, 0) << d;
    EXPECT_EQ(threads & (threads - 1), 0) << d << ": a power of two";
    EXPECT_GE(threads, 32);
    EXPECT_LE(threads, kMaxRowThreads);
    EXPECT_GE(threads, std::min<int64_t>(d, kMaxRowThreads)) << d;
    if (threads > 32) {
      EXPECT_LT(threads / 2, d) << d << ": no more threads than elements need";
    }
  }
  EXPECT_EQ(row_threads(1), 32);
  EXPECT_EQ(row_threads(33), 64);
  EXPECT_EQ(row_threads(4099), kMaxRowThreads);
}

TEST(LayerGeometry, RowBlocksStrideOverEveryRowOnce) {
  for (const int64_t rows : {int64_t{1}, int64_t{13}, kMaxRowBlocks, kMaxRowBlocks + 5}) {
    const int64_t blocks = row_blocks(rows);
    EXPECT_GE(blocks, 1);
    EXPECT_LE(blocks, kMaxRowBlocks);
    std::vector<int> hits(static_cast<size_t>(rows), 0);
    for (int64_t block = 0; block < blocks; ++block)
      for (int64_t row = block; row < rows; row += blocks) ++hits[static_cast<size_t>(row)];
    for (int64_t row = 0; row < rows; ++row)
      ASSERT_EQ(hits[static_cast<size_t>(row)], 1) << rows << " row " << row;
  }
  EXPECT_EQ(row_blocks(0), 0);
}

TEST(LayerGeometry, NormGradChunksCoverEveryRowAndColumnOnce) {
  for (const int64_t rows : {1, 13, 31, 32, 33, 100, 999, 8193, 100001}) {
    for (const int64_t d : {1, 130, 257}) {
      const NormGradGrid g = norm_grad_grid(rows, d);
      EXPECT_LE(g.chunks, kMaxNormGradChunks) << rows;
      EXPECT_GE(g.rows_per_chunk, kMinNormGradChunkRows);
      EXPECT_LT((g.chunks - 1) * g.rows_per_chunk, rows) << rows << ": the last chunk has rows";
      EXPECT_GE(g.chunks * g.rows_per_chunk, rows) << rows;
      EXPECT_GE(g.column_blocks * kNormGradThreads, d);
      EXPECT_LT((g.column_blocks - 1) * kNormGradThreads, d);
      // The partials kernel's bounds: chunk c sums rows [c * rows_per_chunk, min(rows, ...)).
      std::vector<int> hits(static_cast<size_t>(rows), 0);
      for (int64_t c = 0; c < g.chunks; ++c)
        for (int64_t row = c * g.rows_per_chunk; row < std::min(rows, (c + 1) * g.rows_per_chunk); ++row)
          ++hits[static_cast<size_t>(row)];
      for (int64_t row = 0; row < rows; ++row) ASSERT_EQ(hits[static_cast<size_t>(row)], 1) << rows;
      EXPECT_EQ(norm_backward_scratch_doubles(rows, d, 2), 2 * rows + g.chunks * 2 * d);
    }
  }
}

}  // namespace
}  // namespace tokenmill::cuda
