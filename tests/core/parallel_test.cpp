// parallel_for_chunks, parallel_for_balanced and parallel_for_shared_tail: cover [0, n)
// exactly once (inside another parallel region too), chunk boundaries on the grain (the
// alignment), balanced chunks, tail chunks, and the thread-count setting.
#include "core/parallel.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace tokenmill {
namespace {

// The chunks `run_loop(body)` hands to body, sorted.
template <class RunLoop>
std::vector<std::pair<int64_t, int64_t>> chunks_from(RunLoop run_loop) {
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  run_loop([&](int64_t begin, int64_t end) {
    std::lock_guard lock(mutex);
    chunks.emplace_back(begin, end);
  });
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

std::vector<std::pair<int64_t, int64_t>> chunks_of(int64_t n, int64_t grain) {
  return chunks_from([&](auto body) { parallel_for_chunks(n, grain, body); });
}

TEST(ParallelForChunks, CoversTheRangeExactlyOnceOnGrainBoundaries) {
  for (const int threads : {1, 2, 3}) {
    set_thread_count(threads);
    for (const int64_t n : {1, 2, 7, 64, 1000, 1001}) {
      for (const int64_t grain : {1, 3, 16, 5000}) {
        const auto chunks = chunks_of(n, grain);
        ASSERT_FALSE(chunks.empty());
        EXPECT_EQ(chunks.front().first, 0);
        EXPECT_EQ(chunks.back().second, n);
        for (size_t i = 0; i < chunks.size(); ++i) {
          EXPECT_LT(chunks[i].first, chunks[i].second);
          EXPECT_EQ(chunks[i].first % grain, 0) << "n=" << n << " grain=" << grain;
          if (i > 0) {
            EXPECT_EQ(chunks[i].first, chunks[i - 1].second);
          }
        }
        EXPECT_LE(static_cast<int>(chunks.size()), threads);
      }
    }
  }
  set_thread_count(0);
}

std::vector<std::pair<int64_t, int64_t>> balanced_chunks_of(int64_t n, int64_t grain, int64_t align) {
  return chunks_from([&](auto body) { parallel_for_balanced(n, grain, align, body); });
}

TEST(ParallelForBalanced, OneEqualChunkPerThreadOnAlignmentBoundaries) {
  for (const int threads : {1, 2, 3}) {
    set_thread_count(threads);
    for (const int64_t n : {1, 7, 8, 9, 576, 1000, 1001}) {
      for (const int64_t grain : {1, 120, 5000}) {
        for (const int64_t align : {1, 8, 16}) {
          const auto chunks = balanced_chunks_of(n, grain, align);
          const std::string where = "n=" + std::to_string(n) + " grain=" + std::to_string(grain) +
                                    " align=" + std::to_string(align);
          ASSERT_FALSE(chunks.empty()) << where;
          EXPECT_EQ(chunks.front().first, 0) << where;
          EXPECT_EQ(chunks.back().second, n) << where;
          // Threads: no more than whole grains, nor alignment units, nor the thread count.
          const int64_t units = (n + align - 1) / align, grains = (n + grain - 1) / grain;
          EXPECT_EQ(static_cast<int64_t>(chunks.size()), std::min({int64_t{threads}, units, grains}))
              << where;
          int64_t smallest = n, largest = 0;
          for (size_t i = 0; i < chunks.size(); ++i) {
            EXPECT_LT(chunks[i].first, chunks[i].second) << where;
            EXPECT_EQ(chunks[i].first % align, 0) << where;
            if (i > 0) {
              EXPECT_EQ(chunks[i].first, chunks[i - 1].second) << where;
            }
            if (chunks[i].second != n) {  // the last chunk may be short of a whole unit
              smallest = std::min(smallest, chunks[i].second - chunks[i].first);
              largest = std::max(largest, chunks[i].second - chunks[i].first);
            }
          }
          if (largest > 0) {
            EXPECT_LE(largest - smallest, align) << where;
          }
        }
      }
    }
  }
  set_thread_count(0);
}

TEST(ParallelForBalanced, SplitsWhereWholeGrainsWouldNot) {
  // 576 rows in grains of 120 are five grains: 2:3 over two threads. Balanced: 288 each.
  set_thread_count(2);
  const auto chunks = balanced_chunks_of(576, 120, 8);
  set_thread_count(0);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0], std::make_pair(int64_t{0}, int64_t{288}));
  EXPECT_EQ(chunks[1], std::make_pair(int64_t{288}, int64_t{576}));
}

// A region started inside another gets a team of one thread (nesting is off by default):
// parallel_for_balanced must still cover [0, n) with what it gets, and parallel_team's body
// must be told its team is one.
TEST(ParallelForBalanced, CoversTheRangeInsideAnotherParallelRegion) {
  set_thread_count(2);
  std::vector<std::atomic<int>> hits(1000);
  std::atomic<int> outer{0}, teams_of_one{0};
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    outer = omp_get_num_threads();
    parallel_for_balanced(1000, 1, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    parallel_team(2, [&](int, int team) {
      if (team == 1) teams_of_one.fetch_add(1);
    });
  }
  set_thread_count(0);
  for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), outer.load()) << "index " << i;
  EXPECT_EQ(teams_of_one.load(), outer.load());
}

std::vector<std::pair<int64_t, int64_t>> shared_tail_chunks_of(int64_t n, int64_t grain, int64_t tail,
                                                               int64_t tail_grain) {
  return chunks_from([&](auto body) { parallel_for_shared_tail(n, grain, tail, tail_grain, body); });
}

TEST(ParallelForSharedTail, EqualHeadChunksThenTailChunksOfTheTailGrain) {
  for (const int threads : {2, 3}) {
    set_thread_count(threads);
    for (const int64_t n : {7, 100, 576, 1001}) {
      for (const int64_t tail : {int64_t{0}, n / 5, n}) {
        for (const int64_t tail_grain : {1, 7, 50}) {
          const auto chunks = shared_tail_chunks_of(n, 1, tail, tail_grain);
          const std::string where = "threads=" + std::to_string(threads) + " n=" + std::to_string(n) +
                                    " tail=" + std::to_string(tail) +
                                    " tail_grain=" + std::to_string(tail_grain);
          const int64_t head = n - tail;
          std::vector<std::pair<int64_t, int64_t>> expected;
          for (int64_t t = 0; t < threads; ++t)
            if (head * t / threads < head * (t + 1) / threads)
              expected.emplace_back(head * t / threads, head * (t + 1) / threads);
          for (int64_t first = head; first < n; first += tail_grain)
            expected.emplace_back(first, std::min(n, first + tail_grain));
          EXPECT_EQ(chunks, expected) << where;
        }
      }
    }
  }
  set_thread_count(0);
}

TEST(ParallelForSharedTail, OneChunkWhenTheGrainAllowsOneThread) {
  set_thread_count(2);
  EXPECT_EQ(shared_tail_chunks_of(100, 200, 20, 5), (std::vector<std::pair<int64_t, int64_t>>{{0, 100}}));
  set_thread_count(1);
  EXPECT_EQ(shared_tail_chunks_of(100, 1, 20, 5), (std::vector<std::pair<int64_t, int64_t>>{{0, 100}}));
  set_thread_count(0);
}

TEST(ParallelForSharedTail, OutOfRangeTailsAndGrainsAreClamped) {
  set_thread_count(2);
  // A tail past n shares everything; a negative one nothing; a tail grain below 1 acts as 1.
  EXPECT_EQ(shared_tail_chunks_of(4, 1, 10, 3), (std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {3, 4}}));
  EXPECT_EQ(shared_tail_chunks_of(4, 1, -1, 3), (std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {2, 4}}));
  EXPECT_EQ(shared_tail_chunks_of(4, 1, 2, 0),
            (std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 2}, {2, 3}, {3, 4}}));
  set_thread_count(0);
}

TEST(ParallelForChunks, EmptyRangeCallsNothing) {
  int calls = 0;
  parallel_for_chunks(0, 1, [&](int64_t, int64_t) { ++calls; });
  parallel_for_chunks(-5, 1, [&](int64_t, int64_t) { ++calls; });
  parallel_for_shared_tail(0, 1, 0, 1, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(ParallelForChunks, NonPositiveGrainActsAsOne) {
  const auto chunks = chunks_of(10, 0);
  EXPECT_EQ(chunks.front().first, 0);
  EXPECT_EQ(chunks.back().second, 10);
}

TEST(ParallelForChunks, EveryIndexVisitedOnce) {
  std::vector<std::atomic<int>> hits(12345);
  parallel_for_chunks(12345, 7, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  for (const auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadCount, SetAndRestore) {
  const int initial = thread_count();
  set_thread_count(3);
  EXPECT_EQ(thread_count(), 3);
  set_thread_count(1);
  EXPECT_EQ(thread_count(), 1);
  set_thread_count(0);
  EXPECT_EQ(thread_count(), initial);
}

}  // namespace
}  // namespace tokenmill
