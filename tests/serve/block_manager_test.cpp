// BlockManager: block allocation (lowest ids first, all-or-nothing reserve, release), the
// prefix cache (hits after release and while shared, the last prompt token always left to
// compute, partial blocks never shared, idempotent commit, the hit counters), eviction
// order (least recently released, a chain's tail before its head), forced hash collisions
// that must never match, prefix spaces that never share, prefix caching off, sliding windows' releases before
// a position, and argument errors.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "serve/block_manager.h"
#include "support/expect_error.h"

namespace tokenmill {
namespace {

using testing::expect_error;

std::vector<int32_t> iota_tokens(int32_t n, int32_t first = 100) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

BlockTable in_space(uint32_t space) {
  BlockTable t;
  t.space = space;
  return t;
}

// A sequence that looks its prompt up, reserves it and computes all of it.
BlockTable run_prompt(BlockManager& bm, const std::vector<int32_t>& prompt, uint32_t space = 0) {
  BlockTable t = in_space(space);
  bm.match_prefix(prompt, t);
  EXPECT_TRUE(bm.reserve(t, static_cast<int64_t>(prompt.size())));
  bm.commit(t, prompt, static_cast<int64_t>(prompt.size()));
  return t;
}

// Weak hashes that force collisions: every block hashes alike; or the parent is ignored, so
// equal blocks after different prefixes collide.
uint64_t constant_hash(uint64_t, std::span<const int32_t>) { return 42; }
uint64_t parentless_hash(uint64_t, std::span<const int32_t> tokens) { return hash_block_tokens(0, tokens); }

TEST(BlockManager, RejectsBadArguments) {
  expect_error([] { BlockManager(0, 16, true); }, {"0 blocks", "out of range"});
  expect_error([] { BlockManager(int64_t{1} << 31, 16, true); }, {"2147483648 blocks"});
  expect_error([] { BlockManager(8, 0, true); }, {"block size 0", "power of two"});
  expect_error([] { BlockManager(8, 12, false); }, {"block size 12", "power of two"});
  expect_error([] { BlockManager(8, -4, true); }, {"block size -4"});
  expect_error([] { BlockManager(8, 16, true, nullptr); }, {"no hash function"});
  BlockManager bm(4, 4, true);
  expect_error([&] { bm.blocks_for(-1); }, {"negative token count -1"});
  BlockTable t;
  ASSERT_TRUE(bm.reserve(t, 4));
  expect_error([&] { bm.match_prefix(iota_tokens(8), t); }, {"empty block table", "1 blocks"});
  expect_error([&] { bm.commit(t, iota_tokens(8), 5); }, {"commit 5 tokens", "4 reserved slots"});
  expect_error([&] { bm.commit(t, iota_tokens(2), 3); }, {"commit 3 tokens", "with 2 tokens"});
}

TEST(BlockManager, HandsOutLowestIdsAndCountsBlocks) {
  BlockManager bm(8, 4, true);
  EXPECT_EQ(bm.num_blocks(), 8);
  EXPECT_EQ(bm.block_size(), 4);
  EXPECT_EQ(bm.blocks_for(0), 0);
  EXPECT_EQ(bm.blocks_for(1), 1);
  EXPECT_EQ(bm.blocks_for(4), 1);
  EXPECT_EQ(bm.blocks_for(5), 2);
  BlockTable a, b;
  ASSERT_TRUE(bm.reserve(a, 5));
  ASSERT_TRUE(bm.reserve(b, 4));
  EXPECT_EQ(a.blocks, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(b.blocks, (std::vector<int32_t>{2}));
  ASSERT_TRUE(bm.reserve(a, 8));  // already room: nothing changes
  EXPECT_EQ(a.blocks.size(), 2u);
  ASSERT_TRUE(bm.reserve(a, 9));  // grows by one block
  EXPECT_EQ(a.blocks, (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(bm.used_blocks(), 4);
  EXPECT_EQ(bm.available_blocks(), 4);
}

TEST(BlockManager, ReserveIsAllOrNothing) {
  BlockManager bm(4, 4, false);
  BlockTable a, b, c;
  ASSERT_TRUE(bm.reserve(a, 8));
  EXPECT_FALSE(bm.reserve(b, 12));  // needs 3, 2 left
  EXPECT_TRUE(b.blocks.empty());
  EXPECT_FALSE(bm.reserve(a, 17));  // growing by 3 fails the same way
  EXPECT_EQ(a.blocks.size(), 2u);
  EXPECT_EQ(bm.used_blocks(), 2);
  EXPECT_EQ(bm.available_blocks(), 2);
  ASSERT_TRUE(bm.reserve(b, 8));
  EXPECT_EQ(bm.available_blocks(), 0);
  EXPECT_FALSE(bm.reserve(c, 1));
  EXPECT_TRUE(bm.reserve(c, 0));  // nothing needed
}

TEST(BlockManager, ReleaseReturnsBlocks) {
  BlockManager bm(4, 4, false);
  BlockTable a, b;
  ASSERT_TRUE(bm.reserve(a, 16));
  EXPECT_EQ(bm.available_blocks(), 0);
  bm.release(a);
  EXPECT_TRUE(a.blocks.empty());
  EXPECT_EQ(bm.used_blocks(), 0);
  EXPECT_EQ(bm.available_blocks(), 4);
  ASSERT_TRUE(bm.reserve(b, 16));
  bm.release(b);
  bm.release(b);  // an emptied table releases nothing
  EXPECT_EQ(bm.available_blocks(), 4);
}

TEST(BlockManager, ReleaseBeforeFreesTheWholeBlocksBeforeAPosition) {
  BlockManager bm(6, 4, false);
  BlockTable t;
  ASSERT_TRUE(bm.reserve(t, 20));  // blocks 0..4 for positions 0..19
  bm.release_before(t, 7);         // position 7 is in block 1: only block 0 is wholly before it
  EXPECT_EQ(t.blocks, (std::vector<int32_t>{bm.null_block(), 1, 2, 3, 4}));
  EXPECT_EQ(t.released_blocks, 1);
  EXPECT_EQ(bm.used_blocks(), 4);
  bm.release_before(t, 12);  // blocks 1 and 2
  bm.release_before(t, 3);   // nothing more: positions only move forward
  EXPECT_EQ(t.blocks, (std::vector<int32_t>{bm.null_block(), bm.null_block(), bm.null_block(), 3, 4}));
  EXPECT_EQ(bm.available_blocks(), 4);
  ASSERT_TRUE(bm.reserve(t, 24));  // one more block at the end; the table keeps its positions
  EXPECT_EQ(t.blocks.size(), 6u);
  EXPECT_EQ(bm.null_block(), 6);
  bm.release(t);  // the null entries are not released again
  EXPECT_EQ(bm.used_blocks(), 0);
  EXPECT_EQ(bm.available_blocks(), 6);
  BlockTable none;
  bm.release_before(none, 100);  // an empty table
  EXPECT_TRUE(none.blocks.empty());
}

TEST(BlockManager, ReleasedWindowBlocksStayCachedAndTheLastCommittedOneIsKept) {
  BlockManager bm(8, 4, true);
  const auto tokens = iota_tokens(16);
  BlockTable a = run_prompt(bm, tokens);  // four committed blocks
  const std::vector<int32_t> held = a.blocks;
  bm.release_before(a, 16);  // all four are before 16; the last committed one stays
  EXPECT_EQ(a.released_blocks, 3);
  EXPECT_EQ(a.blocks[3], held[3]);
  EXPECT_EQ(bm.used_blocks(), 1);
  ASSERT_TRUE(bm.reserve(a, 20));  // the sequence goes on and commits a fifth block
  auto longer = tokens;
  for (int32_t i = 0; i < 4; ++i) longer.push_back(200 + i);
  bm.commit(a, longer, 20);
  EXPECT_EQ(a.committed_blocks, 5);
  // Another sequence with the same start finds the released blocks in the prefix cache.
  BlockTable b;
  EXPECT_EQ(bm.match_prefix(longer, b), 16);
  EXPECT_EQ(std::vector<int32_t>(b.blocks.begin(), b.blocks.begin() + 3),
            std::vector<int32_t>(held.begin(), held.begin() + 3));
  bm.release(a);
  bm.release(b);
  EXPECT_EQ(bm.used_blocks(), 0);
}

TEST(BlockManager, ReusesCachedBlocksAfterRelease) {
  BlockManager bm(8, 4, true);
  const auto prompt = iota_tokens(10);  // two full blocks and a partial one
  BlockTable a = run_prompt(bm, prompt);
  EXPECT_EQ(a.committed_blocks, 2);
  const std::vector<int32_t> first_two(a.blocks.begin(), a.blocks.begin() + 2);
  const uint64_t chain = a.chain_hash;
  bm.release(a);
  EXPECT_EQ(bm.used_blocks(), 0);
  EXPECT_EQ(bm.available_blocks(), 8);  // the two cached blocks are evictable

  BlockTable b;
  EXPECT_EQ(bm.match_prefix(prompt, b), 8);
  EXPECT_EQ(b.blocks, first_two);
  EXPECT_EQ(b.committed_blocks, 2);
  EXPECT_EQ(b.chain_hash, chain);
  EXPECT_EQ(bm.used_blocks(), 2);
  EXPECT_EQ(bm.available_blocks(), 6);
  ASSERT_TRUE(bm.reserve(b, 10));
  EXPECT_EQ(b.blocks.size(), 3u);
}

TEST(BlockManager, SharesCachedBlocksWithARunningSequence) {
  BlockManager bm(8, 4, true);
  const auto prompt = iota_tokens(10);
  BlockTable a = run_prompt(bm, prompt);
  BlockTable b;
  EXPECT_EQ(bm.match_prefix(prompt, b), 8);
  EXPECT_EQ(b.blocks, std::vector<int32_t>(a.blocks.begin(), a.blocks.begin() + 2));
  ASSERT_TRUE(bm.reserve(b, 10));
  EXPECT_NE(b.blocks[2], a.blocks[2]);  // the partial block is each sequence's own
  EXPECT_EQ(bm.used_blocks(), 4);
  bm.release(a);  // the shared blocks keep b's reference
  EXPECT_EQ(bm.used_blocks(), 3);
  bm.release(b);
  EXPECT_EQ(bm.used_blocks(), 0);
  EXPECT_EQ(bm.available_blocks(), 8);
}

TEST(BlockManager, LeavesTheLastPromptTokenToCompute) {
  BlockManager bm(8, 4, true);
  const auto prompt = iota_tokens(8);  // exactly two blocks
  BlockTable a = run_prompt(bm, prompt);
  EXPECT_EQ(a.committed_blocks, 2);
  BlockTable b, c, d;
  EXPECT_EQ(bm.match_prefix(prompt, b), 4);  // the block with the last token is recomputed
  EXPECT_EQ(bm.match_prefix(iota_tokens(9), c), 8);
  EXPECT_EQ(bm.match_prefix(std::vector<int32_t>{}, d), 0);
}

TEST(BlockManager, NeverSharesAPartialBlock) {
  BlockManager bm(8, 4, true);
  BlockTable a = run_prompt(bm, iota_tokens(10));
  BlockTable b;
  EXPECT_EQ(bm.match_prefix(iota_tokens(13), b), 8);  // tokens 8 and 9 sit in a partial block
}

TEST(BlockManager, CommitIsIdempotentAndRegistersOnlyFullBlocks) {
  BlockManager bm(8, 4, true);
  const auto prompt = iota_tokens(12);
  BlockTable a;
  ASSERT_TRUE(bm.reserve(a, 12));
  bm.commit(a, prompt, 3);
  EXPECT_EQ(a.committed_blocks, 0);
  bm.commit(a, prompt, 5);
  EXPECT_EQ(a.committed_blocks, 1);
  const uint64_t first = a.chain_hash;
  bm.commit(a, prompt, 5);
  bm.commit(a, prompt, 7);
  EXPECT_EQ(a.committed_blocks, 1);
  EXPECT_EQ(a.chain_hash, first);
  bm.commit(a, prompt, 12);
  EXPECT_EQ(a.committed_blocks, 3);
  EXPECT_EQ(a.chain_hash, hash_block_tokens(hash_block_tokens(first, std::span(prompt).subspan(4, 4)),
                                            std::span(prompt).subspan(8, 4)));
  BlockTable b;
  EXPECT_EQ(bm.match_prefix(iota_tokens(13), b), 12);  // committed piecewise, found whole
}

TEST(BlockManager, EvictsTheLeastRecentlyReleasedFirst) {
  BlockManager bm(3, 2, true);
  const std::vector<int32_t> p{1, 2, 0}, q{3, 4, 0};  // one full block each
  BlockTable a = run_prompt(bm, p);
  bm.release(a);
  BlockTable b = run_prompt(bm, q);
  bm.release(b);
  EXPECT_EQ(bm.available_blocks(), 3);
  BlockTable c;
  ASSERT_TRUE(bm.reserve(c, 4));  // the free block, then p's block: released first
  BlockTable hit_p, hit_q;
  EXPECT_EQ(bm.match_prefix(p, hit_p), 0);
  EXPECT_EQ(bm.match_prefix(q, hit_q), 2);
}

TEST(BlockManager, ARenewedHitMovesABlockToTheBackOfTheEvictionOrder) {
  BlockManager bm(3, 2, true);
  const std::vector<int32_t> p{1, 2, 0}, q{3, 4, 0};
  BlockTable a = run_prompt(bm, p);
  BlockTable b;
  ASSERT_TRUE(bm.reserve(b, 2));
  bm.commit(b, q, 2);
  bm.release(a);
  bm.release(b);  // evictable: p's block, then q's
  BlockTable again;
  EXPECT_EQ(bm.match_prefix(p, again), 2);
  bm.release(again);  // now q's block is the older one
  BlockTable c;
  ASSERT_TRUE(bm.reserve(c, 4));  // the free block, then q's
  BlockTable hit_p, hit_q;
  EXPECT_EQ(bm.match_prefix(q, hit_q), 0);
  EXPECT_EQ(bm.match_prefix(p, hit_p), 2);
}

TEST(BlockManager, EvictsTheTailOfAChainBeforeItsHead) {
  BlockManager bm(4, 2, true);
  const std::vector<int32_t> prompt{1, 2, 3, 4, 5, 6, 7};  // three full blocks, one partial
  BlockTable a = run_prompt(bm, prompt);
  const std::vector<int32_t> held = a.blocks;
  bm.release(a);
  BlockTable c, d;
  ASSERT_TRUE(bm.reserve(c, 2));
  EXPECT_EQ(c.blocks[0], held[3]);  // the uncached partial block is free, so it goes first
  ASSERT_TRUE(bm.reserve(d, 2));
  EXPECT_EQ(d.blocks[0], held[2]);  // then the chain's last block
  BlockTable hit;
  EXPECT_EQ(bm.match_prefix(prompt, hit), 4);  // the head of the chain still serves
}

TEST(BlockManager, SequencesComputingTheSamePrefixTogetherExtendOneChain) {
  BlockManager bm(8, 2, true);
  const std::vector<int32_t> short_prompt{1, 2, 3, 4, 0}, long_prompt{1, 2, 3, 4, 5, 6, 0};
  BlockTable a, b;
  bm.match_prefix(short_prompt, a);
  bm.match_prefix(long_prompt, b);  // before a commits: b computes the same two blocks
  ASSERT_TRUE(bm.reserve(a, 5));
  ASSERT_TRUE(bm.reserve(b, 7));
  bm.commit(a, short_prompt, 5);
  bm.commit(b, long_prompt, 7);  // b's first two stay private; its third extends a's chain
  BlockTable c;
  EXPECT_EQ(bm.match_prefix(long_prompt, c), 6);
  EXPECT_EQ(c.blocks, (std::vector<int32_t>{a.blocks[0], a.blocks[1], b.blocks[2]}));
  bm.release(c);
  bm.release(b);  // b's private twins are free again; its registered block stays cached
  EXPECT_EQ(bm.used_blocks(), 3);
  BlockTable d;
  EXPECT_EQ(bm.match_prefix(long_prompt, d), 6);
}

TEST(BlockManager, AHashCollisionBetweenDifferentBlocksNeverMatches) {
  BlockManager bm(8, 4, true, constant_hash);
  const std::vector<int32_t> p{1, 2, 3, 4, 0}, q{5, 6, 7, 8, 0};
  BlockTable a = run_prompt(bm, p);
  BlockTable b = run_prompt(bm, q);  // hashes like p's block, holds other tokens: no match
  EXPECT_EQ(b.committed_blocks, 1);
  bm.release(b);  // its block could not be registered under the taken hash: it is free
  bm.release(a);
  BlockTable hit_q, hit_p;
  EXPECT_EQ(bm.match_prefix(q, hit_q), 0);
  EXPECT_EQ(bm.match_prefix(p, hit_p), 4);
}

TEST(BlockManager, AnEqualBlockAfterADifferentPrefixNeverMatches) {
  BlockManager bm(8, 2, true, parentless_hash);
  const std::vector<int32_t> p{1, 1, 7, 7, 0}, q{2, 2, 0}, r{2, 2, 7, 7, 0};
  BlockTable a = run_prompt(bm, p);
  BlockTable b = run_prompt(bm, q);
  // r's first block is q's; its second hashes and reads like p's second, whose keys were
  // computed after {1, 1}: it must not be taken.
  BlockTable c;
  EXPECT_EQ(bm.match_prefix(r, c), 2);
  EXPECT_EQ(c.blocks[0], b.blocks[0]);
  ASSERT_TRUE(bm.reserve(c, 5));
  bm.commit(c, r, 5);
  bm.release(c);  // {7, 7} after {2, 2} stayed private: the hash was taken
  BlockTable d;
  EXPECT_EQ(bm.match_prefix(r, d), 2);
}

TEST(BlockManager, PrefixSpacesShareNothingEvenWhenEveryHashCollides) {
  for (const BlockHash hash : {hash_block_tokens, constant_hash}) {
    BlockManager bm(8, 2, true, hash);
    const std::vector<int32_t> prompt{1, 2, 3, 4, 0};
    BlockTable base = run_prompt(bm, prompt);
    BlockTable other = run_prompt(bm, prompt, 7);  // same tokens, another adapter's keys
    EXPECT_EQ(other.committed_blocks, 2);
    for (const int32_t id : other.blocks) EXPECT_EQ(std::ranges::count(base.blocks, id), 0);
    BlockTable again = in_space(7);  // its own space still hits, while running and after release
    EXPECT_EQ(bm.match_prefix(prompt, again), hash == constant_hash ? 0 : 4);
    bm.release(again);
    EXPECT_EQ(again.space, 7u);
    bm.release(other);
    bm.release(base);
    BlockTable third = in_space(3);
    EXPECT_EQ(bm.match_prefix(prompt, third), 0);
    BlockTable in_base;  // with one hash for all, only its first block could be registered
    EXPECT_EQ(bm.match_prefix(prompt, in_base), hash == constant_hash ? 2 : 4);
  }
}

TEST(BlockManager, WithoutPrefixCachingNothingIsShared) {
  BlockManager bm(4, 2, false);
  const std::vector<int32_t> prompt{1, 2, 3, 4, 5};
  BlockTable a = run_prompt(bm, prompt);
  EXPECT_EQ(a.committed_blocks, 0);
  bm.release(a);
  BlockTable b;
  EXPECT_EQ(bm.match_prefix(prompt, b), 0);
  EXPECT_TRUE(b.blocks.empty());
  EXPECT_EQ(bm.available_blocks(), 4);
}

}  // namespace
}  // namespace tokenmill
