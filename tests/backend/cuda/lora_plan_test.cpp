// lora_plan.h and lora_kernels.h's addressing: every covered row of an add_lora call found in
// its segment, once, in order, with its own slice of the intermediates; grids that cover the
// largest rank and every row on odd and huge sizes.
#include "backend/cuda/lora_plan.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/lora_kernels.h"

namespace tokenmill::cuda {
namespace {

TEST(LoraPlan, EveryCoveredRowFindsItsSegmentRowAndIntermediates) {
  // Ranks 3, 1, 64, 1024; rows 2, 1, 33, 1; a gap before, between and after them.
  struct Case {
    int64_t first_row, rows, rank;
  };
  const Case cases[] = {{1, 2, 3}, {3, 1, 1}, {6, 33, 64}, {50, 1, 1024}};
  std::vector<float> storage(1);  // the adapters' data: only their pointers are read
  std::vector<Tensor> a, b;
  a.reserve(std::size(cases));
  b.reserve(std::size(cases));
  std::vector<Backend::LoraSegment> segments;
  for (const Case& c : cases) {
    a.emplace_back(storage.data(), DType::F32, std::initializer_list<int64_t>{c.rank, 5});
    b.emplace_back(storage.data(), DType::F32, std::initializer_list<int64_t>{7, c.rank});
    segments.push_back({.first_row = c.first_row, .rows = c.rows, .a = &a.back(), .b = &b.back()});
  }
  LoraTable table;
  table.segments.resize(9);  // an earlier call's entries are replaced
  lora_table(segments, table);
  ASSERT_EQ(table.segments.size(), std::size(cases));
  EXPECT_EQ(table.covered_rows, 2 + 1 + 33 + 1);
  EXPECT_EQ(table.t_floats, 2 * 3 + 1 * 1 + 33 * 64 + 1 * 1024);

  const auto count = static_cast<int64_t>(table.segments.size());
  std::vector<int64_t> rows, t_starts;
  for (int64_t c = 0; c < table.covered_rows; ++c) {
    const int64_t s = lora_segment_of(table.segments.data(), count, c);
    const LoraSegmentEntry& e = table.segments[static_cast<size_t>(s)];
    const int64_t row = lora_row(e, c);
    EXPECT_GE(row, cases[s].first_row) << c;
    EXPECT_LT(row, cases[s].first_row + cases[s].rows) << c;
    EXPECT_EQ(e.rank, cases[s].rank);
    rows.push_back(row);
    t_starts.push_back(lora_first_t(e, c));
  }
  const std::vector<int64_t> want_rows = [&] {
    std::vector<int64_t> v;
    for (const Case& c : cases)
      for (int64_t r = c.first_row; r < c.first_row + c.rows; ++r) v.push_back(r);
    return v;
  }();
  EXPECT_EQ(rows, want_rows);
  // Each row's rank floats follow the previous row's: disjoint, and together exactly t_floats.
  int64_t next = 0;
  for (int64_t c = 0; c < table.covered_rows; ++c) {
    EXPECT_EQ(t_starts[static_cast<size_t>(c)], next) << c;
    next += table.segments[static_cast<size_t>(lora_segment_of(table.segments.data(), count, c))].rank;
  }
  EXPECT_EQ(next, table.t_floats);

  lora_table({}, table);
  EXPECT_TRUE(table.segments.empty());
  EXPECT_EQ(table.covered_rows, 0);
  EXPECT_EQ(table.t_floats, 0);
}

TEST(LoraPlan, GridsCoverTheLargestRankAndEveryRow) {
  for (const int64_t rank : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{9}, int64_t{300}, kLoraMaxRank}) {
    const Grid g = lora_shrink_grid(5, rank);
    EXPECT_GE(g.x * kLoraWarps, rank) << rank;        // one pass over t's elements
    EXPECT_LT((g.x - 1) * kLoraWarps, rank) << rank;  // no idle block
    EXPECT_EQ(g.y, 5);
  }
  EXPECT_EQ(lora_shrink_grid(1000000, 16).y, kMaxGridY);  // rows past it: blocks stride
  for (const int64_t m : {int64_t{1}, int64_t{33}, int64_t{256}, int64_t{257}, int64_t{4096}}) {
    const Grid g = lora_expand_grid(3, m);
    EXPECT_GE(g.x * kLoraThreads, m) << m;
    EXPECT_LT((g.x - 1) * kLoraThreads, m) << m;
    EXPECT_EQ(g.y, 3);
  }
  EXPECT_EQ(lora_expand_grid(1, int64_t{1} << 40).x, kMaxGridX);
  EXPECT_EQ(lora_expand_grid(1000000, 1).y, kMaxGridY);
}

}  // namespace
}  // namespace tokenmill::cuda
