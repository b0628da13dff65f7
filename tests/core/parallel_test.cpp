// parallel_for_chunks: covers [0, n) exactly once, chunk boundaries on the grain, and the
// thread-count setting.
#include "core/parallel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

namespace tokenmill {
namespace {

std::vector<std::pair<int64_t, int64_t>> chunks_of(int64_t n, int64_t grain) {
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  parallel_for_chunks(n, grain, [&](int64_t begin, int64_t end) {
    std::lock_guard lock(mutex);
    chunks.emplace_back(begin, end);
  });
  std::sort(chunks.begin(), chunks.end());
  return chunks;
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

TEST(ParallelForChunks, EmptyRangeCallsNothing) {
  int calls = 0;
  parallel_for_chunks(0, 1, [&](int64_t, int64_t) { ++calls; });
  parallel_for_chunks(-5, 1, [&](int64_t, int64_t) { ++calls; });
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
