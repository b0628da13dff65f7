// BlockManager under random load: many sequences look their prompts up, compute them in
// chunks, decode, get preempted when the pool runs dry and finish in random order, with the
// real hash and with weak ones that collide all the time. After every step a simple model
// checks: used + available == num_blocks; used == the blocks live tables hold, so each
// block's reference count equals its holders; a block in several tables was registered by
// at most one of them and is never written again; every block a lookup returns holds KV
// computed for exactly the prompt's prefix; the hit counters add up.
#include <algorithm>
#include <cstdint>
#include <map>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "serve/block_manager.h"

namespace tokenmill {
namespace {

constexpr int64_t kBlocks = 32, kBlockSize = 4, kMaxLive = 12;

uint64_t parentless_hash(uint64_t, std::span<const int32_t> tokens) { return hash_block_tokens(0, tokens); }
uint64_t tiny_hash(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t sum = parent * 31;
  for (int32_t t : tokens) sum += static_cast<uint64_t>(t);
  return sum % 8;
}

struct Config {
  const char* name;
  BlockHash hash;
  bool prefix_caching;
};
void PrintTo(const Config& c, std::ostream* os) { *os << c.name; }

struct Seq {
  std::vector<int32_t> tokens;
  int64_t computed = 0;        // tokens whose KV is written
  int64_t matched_blocks = 0;  // leading blocks taken from the prefix cache
  BlockTable table;
};

class Stress {
 public:
  explicit Stress(const Config& c)
      : bm_(kBlocks, kBlockSize, c.prefix_caching, c.hash), caching_(c.prefix_caching) {
    for (auto& base : bases_) {
      base.resize(48);
      for (auto& t : base) t = draw(3);
    }
  }

  void run(int steps) {
    for (int i = 0; i < steps && !::testing::Test::HasFatalFailure(); ++i) {
      const int64_t op = draw(10);
      if (op < 3 && static_cast<int64_t>(live_.size()) < kMaxLive) {
        start();
      } else if (op < 8 && !live_.empty()) {
        step(live_[static_cast<size_t>(draw(static_cast<int64_t>(live_.size())))]);
      } else if (!live_.empty()) {
        finish(static_cast<size_t>(draw(static_cast<int64_t>(live_.size()))));
      }
      if (!::testing::Test::HasFatalFailure()) check();
    }
    if (::testing::Test::HasFatalFailure()) return;
    while (!live_.empty()) finish(0);
    EXPECT_EQ(bm_.used_blocks(), 0);
    EXPECT_EQ(bm_.available_blocks(), kBlocks);
    EXPECT_GT(preempted_, 0) << "the pool never ran dry";
    if (caching_) {
      EXPECT_GT(hits_, 0) << "no prefix was ever found";
      EXPECT_GT(shared_, 0) << "no block was ever shared by two running sequences";
    }
  }

 private:
  int64_t draw(int64_t n) { return static_cast<int64_t>(rng_() % static_cast<uint64_t>(n)); }

  // A prefix of one of three bases, then a few random tokens, over a vocabulary of 3.
  void start() {
    Seq s;
    const auto& base = bases_[static_cast<size_t>(draw(3))];
    s.tokens.assign(base.begin(), base.begin() + 1 + draw(40));
    for (int64_t i = draw(6); i > 0; --i) s.tokens.push_back(static_cast<int32_t>(draw(3)));
    const auto size = static_cast<int64_t>(s.tokens.size());
    const int64_t covered = bm_.match_prefix(s.tokens, s.table);
    hits_ += covered;
    ASSERT_EQ(covered % kBlockSize, 0);
    ASSERT_LE(covered, (size - 1) / kBlockSize * kBlockSize);
    ASSERT_EQ(static_cast<int64_t>(s.table.blocks.size()), covered / kBlockSize);
    ASSERT_EQ(s.table.committed_blocks, covered / kBlockSize);
    for (size_t i = 0; i < s.table.blocks.size(); ++i) {
      const auto it = written_.find(s.table.blocks[i]);
      ASSERT_NE(it, written_.end()) << "a cached block that was never computed";
      ASSERT_EQ(it->second,
                std::vector<int32_t>(s.tokens.begin(),
                                     s.tokens.begin() + static_cast<int64_t>((i + 1)) * kBlockSize))
          << "block " << s.table.blocks[i] << " holds the KV of another prefix";
    }
    s.computed = covered;
    s.matched_blocks = covered / kBlockSize;
    live_.push_back(std::move(s));
  }

  // Computes a chunk of the prompt, or decodes one token (feeding a sampled one).
  void step(Seq& s) {
    if (s.computed == static_cast<int64_t>(s.tokens.size()))
      s.tokens.push_back(static_cast<int32_t>(draw(3)));
    const int64_t target = std::min<int64_t>(static_cast<int64_t>(s.tokens.size()), s.computed + 1 + draw(6));
    const std::vector<int32_t> before = s.table.blocks;
    const int64_t used = bm_.used_blocks(), available = bm_.available_blocks();
    if (!bm_.reserve(s.table, target)) {
      EXPECT_GT(bm_.blocks_for(target) - static_cast<int64_t>(before.size()), available);
      ASSERT_EQ(s.table.blocks, before);
      ASSERT_EQ(bm_.used_blocks(), used);
      ASSERT_EQ(bm_.available_blocks(), available);
      ++preempted_;
      finish(static_cast<size_t>(&s - live_.data()));
      return;
    }
    // The blocks receiving positions [computed, target) belong to this sequence alone.
    for (int64_t b = s.computed / kBlockSize; b <= (target - 1) / kBlockSize; ++b)
      ASSERT_EQ(holders(s.table.blocks[static_cast<size_t>(b)]), 1) << "writing into a shared block";
    bm_.commit(s.table, s.tokens, target);
    for (int64_t b = s.computed / kBlockSize; b < target / kBlockSize; ++b)
      written_[s.table.blocks[static_cast<size_t>(b)]].assign(s.tokens.begin(),
                                                              s.tokens.begin() + (b + 1) * kBlockSize);
    s.computed = target;
    ASSERT_EQ(s.table.committed_blocks, caching_ ? target / kBlockSize : 0);
  }

  void finish(size_t index) {
    bm_.release(live_[index].table);
    ASSERT_TRUE(live_[index].table.blocks.empty());
    live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(index));
  }

  int64_t holders(int32_t block) const {
    int64_t n = 0;
    for (const Seq& s : live_) n += std::count(s.table.blocks.begin(), s.table.blocks.end(), block);
    return n;
  }

  void check() {
    ASSERT_EQ(bm_.used_blocks() + bm_.available_blocks(), kBlocks);
    struct Holding {
      size_t index;
      bool matched;
      bool committed;
    };
    std::map<int32_t, std::vector<Holding>> held;
    for (const Seq& s : live_)
      for (size_t i = 0; i < s.table.blocks.size(); ++i)
        held[s.table.blocks[i]].push_back({i, static_cast<int64_t>(i) < s.matched_blocks,
                                           static_cast<int64_t>(i) < s.table.committed_blocks});
    ASSERT_EQ(static_cast<int64_t>(held.size()), bm_.used_blocks());
    for (const auto& [block, holdings] : held) {
      if (holdings.size() < 2) continue;
      ++shared_;
      ASSERT_TRUE(caching_) << "block " << block << " shared without prefix caching";
      int64_t reserved = 0;
      for (const Holding& h : holdings) {
        ASSERT_EQ(h.index, holdings[0].index) << "block " << block << " at two positions";
        ASSERT_TRUE(h.committed) << "block " << block << " shared before it was full";
        reserved += h.matched ? 0 : 1;
      }
      ASSERT_LE(reserved, 1) << "block " << block << " handed out twice";
    }
  }

  BlockManager bm_;
  bool caching_;
  std::mt19937_64 rng_{20261203};
  std::vector<int32_t> bases_[3];
  std::vector<Seq> live_;
  std::map<int32_t, std::vector<int32_t>> written_;  // block -> the prefix whose KV it last received
  int64_t hits_ = 0, preempted_ = 0, shared_ = 0;
};

class BlockManagerStress : public ::testing::TestWithParam<Config> {};

TEST_P(BlockManagerStress, KeepsItsInvariants) { Stress(GetParam()).run(20000); }

INSTANTIATE_TEST_SUITE_P(
    Hashes, BlockManagerStress,
    ::testing::Values(Config{"real", hash_block_tokens, true}, Config{"parentless", parentless_hash, true},
                      Config{"tiny", tiny_hash, true}, Config{"off", hash_block_tokens, false}),
    [](const ::testing::TestParamInfo<Config>& param_info) { return std::string(param_info.param.name); });

}  // namespace
}  // namespace tokenmill
