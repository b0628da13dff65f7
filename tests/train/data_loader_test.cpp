// DataLoader: window arithmetic, one visit per window per epoch, seeded order, exact resume.
#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <vector>

#include "support/expect_error.h"
#include "support/temp_dir.h"
#include "train/data_loader.h"
#include "train/token_shard.h"

namespace tokenmill {
namespace {

using testing::expect_error;
using testing::TempDir;

// Two shards whose token i is its position (+1000 in the second), so windows are recognisable.
std::vector<std::filesystem::path> counting_shards(const TempDir& dir) {
  std::vector<int32_t> a(23), b(12);
  std::iota(a.begin(), a.end(), 0);
  std::iota(b.begin(), b.end(), 1000);
  write_token_shard(dir.path() / "a", a, 2000, 0);
  write_token_shard(dir.path() / "b", b, 2000, 0);
  return {dir.path() / "a", dir.path() / "b"};
}

TEST(DataLoader, WindowsShiftTargetsByOne) {
  const TempDir dir;
  DataLoader loader(counting_shards(dir), 5, /*shuffle=*/false, 1);
  EXPECT_EQ(loader.windows_per_epoch(), 4 + 2);  // (23 - 1) / 5 = 4, (12 - 1) / 5 = 2
  std::vector<int32_t> in(10), tgt(10);
  loader.next_batch(2, in, tgt);
  EXPECT_EQ(in, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(tgt, (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  loader.next_batch(2, in, tgt);
  loader.next_batch(2, in, tgt);
  EXPECT_EQ(in[5], 1005);  // the second shard's second window
  loader.next_batch(1, std::span(in).first(5), std::span(tgt).first(5));
  EXPECT_EQ(in[0], 0);  // wrapped into epoch 1
  EXPECT_EQ(loader.position().epoch, 1);
}

TEST(DataLoader, ShuffledEpochVisitsEveryWindowOnceInASeededOrder) {
  const TempDir dir;
  const auto shards = counting_shards(dir);
  const auto epoch_starts = [&](uint64_t seed) {
    DataLoader loader(shards, 5, /*shuffle=*/true, seed);
    std::vector<int32_t> starts;
    std::vector<int32_t> in(5), tgt(5);
    for (int64_t i = 0; i < loader.windows_per_epoch(); ++i) {
      loader.next_batch(1, in, tgt);
      starts.push_back(in[0]);
    }
    return starts;
  };
  const auto a = epoch_starts(42);
  EXPECT_EQ(std::set<int32_t>(a.begin(), a.end()), (std::set<int32_t>{0, 5, 10, 15, 1000, 1005}));
  EXPECT_EQ(epoch_starts(42), a);
  EXPECT_NE(epoch_starts(43), a);  // 720 orders; these two seeds differ (checked once, fixed forever)
}

TEST(DataLoader, RestoredPositionContinuesExactly) {
  const TempDir dir;
  const auto shards = counting_shards(dir);
  DataLoader straight(shards, 5, true, 9);
  std::vector<int32_t> in(15), tgt(15), expect_in(15), expect_tgt(15);
  for (int i = 0; i < 3; ++i) straight.next_batch(3, in, tgt);  // into the second epoch
  const LoaderPosition saved = straight.position();
  straight.next_batch(3, expect_in, expect_tgt);

  DataLoader resumed(shards, 5, true, 9);
  resumed.restore(saved);
  resumed.next_batch(3, in, tgt);
  EXPECT_EQ(in, expect_in);
  EXPECT_EQ(tgt, expect_tgt);
  expect_error([&] { resumed.restore({0, 7}); }, {"does not fit this data"});
}

TEST(DataLoader, RefusesUnusableData) {
  const TempDir dir;
  write_token_shard(dir.path() / "tiny", std::vector<int32_t>{1, 2, 3}, 10, 0);
  expect_error([&] { DataLoader({dir.path() / "tiny"}, 5, false, 0); }, {"no shard holds 6 tokens"});
  write_token_shard(dir.path() / "other", std::vector<int32_t>{1, 2, 3}, 20, 0);
  expect_error(
      [&] {
        DataLoader({dir.path() / "tiny", dir.path() / "other"}, 1, false, 0);
      },
      {"vocabulary size 20 differs"});
  expect_error([&] { DataLoader({}, 5, false, 0); }, {"no token shards"});
}

}  // namespace
}  // namespace tokenmill
