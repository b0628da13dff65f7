// DataLoader: window arithmetic, one visit per window per epoch, seeded order, exact resume,
// and targets of -1 exactly where a shard's loss mask leaves a token unscored.
#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <vector>

#include "formats/token_shard.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"
#include "train/data_loader.h"

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

TEST(DataLoader, UnscoredTargetsAreMinusOne) {
  const TempDir dir;
  std::vector<int32_t> tokens(31);
  std::iota(tokens.begin(), tokens.end(), 0);
  std::vector<uint8_t> mask(31);
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = (i * 7 % 5 < 2) ? 1 : 0;
  for (size_t i = 11; i <= 15; ++i) mask[i] = 0;  // window 2's targets (tokens 11..15): none scored
  write_token_shard(dir.path() / "masked", tokens, 100, 0, mask);
  std::vector<int32_t> plain(11);
  std::iota(plain.begin(), plain.end(), 50);
  write_token_shard(dir.path() / "plain", plain, 100, 0);
  DataLoader loader({dir.path() / "masked", dir.path() / "plain"}, 5, /*shuffle=*/false, 0);
  EXPECT_EQ(loader.windows_per_epoch(), 5 + 2);  // 6 on the masked shard's grid, less the unscored one
  std::vector<int32_t> in(35), tgt(35);
  loader.next_batch(7, in, tgt);
  const std::vector<int32_t> starts = {0, 5, 15, 20, 25, 50, 55};
  for (size_t b = 0; b < starts.size(); ++b) {
    for (size_t j = 0; j < 5; ++j) {
      const int32_t token = starts[b] + static_cast<int32_t>(j);
      EXPECT_EQ(in[b * 5 + j], token);
      const bool scored = token + 1 >= 50 || mask[static_cast<size_t>(token + 1)] != 0;
      EXPECT_EQ(tgt[b * 5 + j], scored ? token + 1 : -1) << "row " << b << " column " << j;
    }
  }
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
  const std::vector<uint8_t> unscored = {1, 0, 0, 0};
  write_token_shard(dir.path() / "unscored", std::vector<int32_t>{1, 2, 3, 4}, 10, 0, unscored);
  expect_error([&] { DataLoader({dir.path() / "unscored"}, 3, false, 0); },
               {"none of the 1 windows of 3 tokens has a scored target"});
}

}  // namespace
}  // namespace tokenmill
