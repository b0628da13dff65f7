#include "serve/block_manager.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace tokenmill {
namespace {

constexpr uint64_t kChainSeed = 0x243f6a8885a308d3ull;  // h_0: the first 64 bits of pi's fraction
constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;     // 2^64 / golden ratio, splitmix64's step
constexpr uint64_t kBrokenChain = std::numeric_limits<uint64_t>::max();

// splitmix64's finalizer (Steele, Lea and Flood 2014): a bijection of 64 bits in which every
// input bit flips each output bit with probability about 1/2.
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// h_0 of prefix space `space` (space 0: kChainSeed).
uint64_t chain_seed(uint32_t space) { return space == 0 ? kChainSeed : mix64(kChainSeed ^ space); }

// Block::parent of a chain's first block in prefix space `space`: a value no registration's
// serial reaches (they count up from 1), one per space, so that a chain's first block is
// matched in its own space only, whatever the hashes.
uint64_t root_chain(uint32_t space) { return kBrokenChain - 1 - space; }

}  // namespace

// h <- mix64((h xor token) + golden) per token: each step is a bijection of h for a fixed token
// and injective in the token for a fixed h, so two different blocks after the same parent
// collide only through the 64-bit mix (probability about 2^-64 for unrelated inputs).
uint64_t hash_block_tokens(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = parent;
  for (int32_t t : tokens) h = mix64((h ^ static_cast<uint32_t>(t)) + kGolden);
  return h;
}

BlockManager::BlockManager(int64_t num_blocks, int64_t block_size, bool prefix_caching, BlockHash hash)
    : num_blocks_(num_blocks), block_size_(block_size), prefix_caching_(prefix_caching), hash_(hash) {
  if (num_blocks < 1 || num_blocks > std::numeric_limits<int32_t>::max())
    fail("KV cache: {} blocks is out of range [1, 2^31 - 1]; give the cache more memory or larger blocks",
         num_blocks);
  if (block_size < 1 || (block_size & (block_size - 1)) != 0)
    fail("KV cache: block size {} is not a power of two; use 16, for example", block_size);
  if (hash_ == nullptr) fail("KV cache: no hash function given for the prefix cache");
  const auto n = static_cast<size_t>(num_blocks);
  blocks_.resize(n);
  if (prefix_caching_) {
    tokens_.resize(n * static_cast<size_t>(block_size));
    cached_.reserve(n);
  }
  free_.resize(n);
  for (size_t i = 0; i < n; ++i) free_[i] = static_cast<int32_t>(n - 1 - i);  // block 0 at the back
}

int64_t BlockManager::num_blocks() const { return num_blocks_; }
int64_t BlockManager::block_size() const { return block_size_; }
int64_t BlockManager::used_blocks() const { return used_; }
int64_t BlockManager::available_blocks() const { return static_cast<int64_t>(free_.size()) + lru_size_; }

int64_t BlockManager::blocks_for(int64_t tokens) const {
  if (tokens < 0) fail("KV cache: cannot size blocks for a negative token count {}", tokens);
  return tokens / block_size_ + (tokens % block_size_ != 0 ? 1 : 0);
}

int64_t BlockManager::match_prefix(std::span<const int32_t> tokens, BlockTable& table) {
  if (!table.blocks.empty())
    fail("KV cache: match_prefix needs an empty block table, this one holds {} blocks", table.blocks.size());
  table.committed_blocks = 0;
  table.chain_hash = chain_seed(table.space);
  if (!prefix_caching_) return 0;
  const auto size = static_cast<int64_t>(tokens.size());
  const int64_t max_blocks = size == 0 ? 0 : (size - 1) / block_size_;
  uint64_t parent = root_chain(table.space);
  for (int64_t i = 0; i < max_blocks; ++i) {
    const auto block = tokens.subspan(static_cast<size_t>(i * block_size_), static_cast<size_t>(block_size_));
    const uint64_t h = hash_(table.chain_hash, block);
    const auto it = cached_.find(h);
    if (it == cached_.end() || !holds(it->second, parent, block)) break;
    const int32_t id = it->second;
    if (blocks_[static_cast<size_t>(id)].refs++ == 0) {
      lru_remove(id);
      ++used_;
    }
    table.blocks.push_back(id);
    table.committed_blocks = i + 1;
    table.chain_hash = h;
    parent = blocks_[static_cast<size_t>(id)].serial;
  }
  return table.committed_blocks * block_size_;
}

bool BlockManager::reserve(BlockTable& table, int64_t total_tokens) {
  const int64_t missing = blocks_for(total_tokens) - static_cast<int64_t>(table.blocks.size());
  if (missing <= 0) return true;
  if (missing > available_blocks()) return false;
  for (int64_t i = 0; i < missing; ++i) table.blocks.push_back(take_block());
  return true;
}

void BlockManager::commit(BlockTable& table, std::span<const int32_t> tokens, int64_t computed) {
  const auto capacity = static_cast<int64_t>(table.blocks.size()) * block_size_;
  if (computed < 0 || computed > static_cast<int64_t>(tokens.size()) || computed > capacity)
    fail("KV cache: cannot commit {} tokens of a sequence with {} tokens in {} reserved slots", computed,
         tokens.size(), capacity);
  if (!prefix_caching_) return;
  for (int64_t i = table.committed_blocks; i < computed / block_size_; ++i) {
    const auto block = tokens.subspan(static_cast<size_t>(i * block_size_), static_cast<size_t>(block_size_));
    const uint64_t h = hash_(i == 0 ? chain_seed(table.space) : table.chain_hash, block);
    const uint64_t parent =
        i == 0 ? root_chain(table.space)
               : blocks_[static_cast<size_t>(table.blocks[static_cast<size_t>(i - 1)])].chain;
    const int32_t id = table.blocks[static_cast<size_t>(i)];
    Block& b = blocks_[static_cast<size_t>(id)];
    b.chain = kBrokenChain;
    if (parent != kBrokenChain) {
      const auto [it, inserted] = cached_.try_emplace(h, id);
      if (inserted) {
        b.serial = next_serial_++;
        b.hash = h;
        b.parent = parent;
        b.chain = b.serial;
        std::copy(block.begin(), block.end(),
                  tokens_.begin() + static_cast<std::ptrdiff_t>(id) * block_size_);
      } else if (holds(it->second, parent, block)) {
        b.chain = blocks_[static_cast<size_t>(it->second)].serial;  // a twin computed the same chain
      }
    }
    table.committed_blocks = i + 1;
    table.chain_hash = h;
  }
}

void BlockManager::drop_reference(int32_t id) {
  Block& b = blocks_[static_cast<size_t>(id)];
  if (--b.refs > 0) return;
  --used_;
  if (b.serial != 0) {
    lru_push_back(id);
  } else {
    b.chain = 0;
    free_.push_back(id);
  }
}

void BlockManager::release(BlockTable& table) {
  // Tail first: a chain's end joins the evictable list before its start and so is evicted
  // first; evicting the start first would leave the rest cached but unreachable.
  const auto held = table.blocks.begin() + static_cast<std::ptrdiff_t>(table.released_blocks);
  for (auto it = table.blocks.end(); it != held;) drop_reference(*--it);
  const uint32_t space = table.space;
  table = BlockTable{};
  table.space = space;
}

void BlockManager::release_before(BlockTable& table, int64_t position) {
  int64_t end =
      std::min(position < 0 ? 0 : position / block_size_, static_cast<int64_t>(table.blocks.size()));
  if (prefix_caching_) end = std::min(end, table.committed_blocks - 1);
  for (int64_t i = end - 1; i >= table.released_blocks; --i) {  // tail first, as release()
    drop_reference(table.blocks[static_cast<size_t>(i)]);
    table.blocks[static_cast<size_t>(i)] = null_block();
  }
  table.released_blocks = std::max(table.released_blocks, end);
}

std::span<const int32_t> BlockManager::block_tokens(int32_t id) const {
  return std::span<const int32_t>(tokens_).subspan(static_cast<size_t>(id) * static_cast<size_t>(block_size_),
                                                   static_cast<size_t>(block_size_));
}

bool BlockManager::holds(int32_t id, uint64_t parent, std::span<const int32_t> tokens) const {
  const auto held = block_tokens(id);
  return blocks_[static_cast<size_t>(id)].parent == parent &&
         std::equal(held.begin(), held.end(), tokens.begin());
}

int32_t BlockManager::take_block() {
  int32_t id = 0;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = lru_head_;
    lru_remove(id);
    Block& evicted = blocks_[static_cast<size_t>(id)];
    cached_.erase(evicted.hash);
    evicted.serial = 0;
  }
  Block& b = blocks_[static_cast<size_t>(id)];
  b.refs = 1;
  b.chain = 0;
  ++used_;
  return id;
}

void BlockManager::lru_push_back(int32_t id) {
  Block& b = blocks_[static_cast<size_t>(id)];
  b.lru_prev = lru_tail_;
  b.lru_next = -1;
  if (lru_tail_ >= 0) {
    blocks_[static_cast<size_t>(lru_tail_)].lru_next = id;
  } else {
    lru_head_ = id;
  }
  lru_tail_ = id;
  ++lru_size_;
}

void BlockManager::lru_remove(int32_t id) {
  Block& b = blocks_[static_cast<size_t>(id)];
  if (b.lru_prev >= 0) {
    blocks_[static_cast<size_t>(b.lru_prev)].lru_next = b.lru_next;
  } else {
    lru_head_ = b.lru_next;
  }
  if (b.lru_next >= 0) {
    blocks_[static_cast<size_t>(b.lru_next)].lru_prev = b.lru_prev;
  } else {
    lru_tail_ = b.lru_prev;
  }
  b.lru_prev = b.lru_next = -1;
  --lru_size_;
}

}  // namespace tokenmill
