// linear_plan.h: launch geometry of the linear-ops kernels on odd and huge sizes, and the
// grouping of embedding-gradient tokens by id.
#include "backend/cuda/linear_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace tokenmill::cuda {
namespace {

// Every index < count is visited exactly once by the grid-stride loop the kernels run.
void expect_covers(const Grid& g, int64_t count) {
  const int64_t stride = g.x * kLinearThreads;
  ASSERT_GE(g.x, 1);
  ASSERT_LE(g.x, kMaxGridX);
  if (count <= kMaxGridX * kLinearThreads) {
    EXPECT_GE(stride, count);                                            // one pass
    EXPECT_LT((g.x - 1) * kLinearThreads, std::max<int64_t>(count, 1));  // no idle block
  }
}

TEST(LinearPlan, ElementwiseGridCoversEveryElement) {
  for (const int64_t count :
       {int64_t{0}, int64_t{1}, int64_t{255}, int64_t{256}, int64_t{257}, int64_t{100000},
        kMaxGridX * kLinearThreads, kMaxGridX * kLinearThreads + 1, int64_t{1} << 40}) {
    SCOPED_TRACE(count);
    const Grid g = elementwise_grid(count);
    EXPECT_EQ(g.y, 1);
    expect_covers(g, count);
  }
  EXPECT_EQ(elementwise_grid(257).x, 2);
  EXPECT_EQ(elementwise_grid(int64_t{1} << 40).x, kMaxGridX);
}

TEST(LinearPlan, RowsGridHasOneBlockRowPerRowUpToTheLimit) {
  EXPECT_EQ(rows_grid(9, 17).x, 1);
  EXPECT_EQ(rows_grid(9, 17).y, 9);
  EXPECT_EQ(rows_grid(1, 1001).x, 4);
  EXPECT_EQ(rows_grid(0, 5).y, 1);
  EXPECT_EQ(rows_grid(kMaxGridY + 7, 64).y, kMaxGridY);  // grid-stride over the rest
  expect_covers(rows_grid(3, 4097), 4097);
}

TEST(LinearPlan, TokenGroupsKeepTokenOrderPerId) {
  const std::vector<int32_t> ids = {5, 0, 5, 7, 0, 5};
  const TokenGroups g = group_tokens_by_id(ids);
  EXPECT_EQ(g.ids, (std::vector<int32_t>{5, 0, 7}));
  EXPECT_EQ(g.starts, (std::vector<int32_t>{0, 3, 5, 6}));
  EXPECT_EQ(g.tokens, (std::vector<int32_t>{0, 2, 5, 1, 4, 3}));
}

TEST(LinearPlan, TokenGroupsOfNoTokens) {
  const TokenGroups g = group_tokens_by_id({});
  EXPECT_TRUE(g.ids.empty());
  EXPECT_EQ(g.starts, std::vector<int32_t>{0});
  EXPECT_TRUE(g.tokens.empty());
}

// Replaying the groups as the kernel does gives, per id, the tokens in increasing order and
// every token exactly once.
TEST(LinearPlan, TokenGroupsPartitionRandomIds) {
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int32_t> id(0, 40);
  std::vector<int32_t> ids(1000);
  for (int32_t& v : ids) v = id(rng);
  const TokenGroups g = group_tokens_by_id(ids);
  ASSERT_EQ(g.starts.size(), g.ids.size() + 1);
  ASSERT_EQ(g.tokens.size(), ids.size());
  std::vector<int> seen(ids.size(), 0);
  std::vector<int> groups_of_id(41, 0);
  for (size_t group = 0; group < g.ids.size(); ++group) {
    ++groups_of_id[static_cast<size_t>(g.ids[group])];
    ASSERT_LT(g.starts[group], g.starts[group + 1]) << "empty group";
    for (int32_t j = g.starts[group]; j < g.starts[group + 1]; ++j) {
      const auto t = static_cast<size_t>(g.tokens[static_cast<size_t>(j)]);
      EXPECT_EQ(ids[t], g.ids[group]);
      ++seen[t];
      if (j > g.starts[group]) {
        EXPECT_LT(g.tokens[static_cast<size_t>(j - 1)], g.tokens[static_cast<size_t>(j)]);
      }
    }
  }
  for (const int s : seen) EXPECT_EQ(s, 1);
  for (const int c : groups_of_id) EXPECT_LE(c, 1) << "an id in two groups";
}

}  // namespace
}  // namespace tokenmill::cuda
