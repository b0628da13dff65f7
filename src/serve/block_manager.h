// BlockManager: bookkeeping of the paged KV cache (which block holds which positions of
// which sequence), with prefix caching. It owns no tensors: block b of the pool tensors
// (Backend::paged_attention) is simply the id b.
//
// A sequence's BlockTable lists its blocks in position order; position p lives in slot
// blocks[p / block_size] * block_size + p % block_size. Blocks are reference counted.
//
// Prefix caching: once every position of a block has its KV written (commit), the block is
// registered under the hash chain of the sequence's tokens up to its end,
//   h_0 = seed,  h_{i+1} = hash(h_i, tokens of block i),
// and keeps that identity after its last reference goes: it then waits, evictable, in
// least-recently-released order. A later prompt that starts with the same tokens takes
// those blocks instead of recomputing them (match_prefix). A block's tokens, and which cached
// block precedes it, are compared too, so a hash collision can never hand a sequence another
// prompt's keys. Only full blocks are shared, so a shared block is never written again (no
// copy-on-write needed). Where the keys depend on more than the tokens (the LoRA adapter
// that computed them), each kind of sequence keeps to its own prefix space
// (BlockTable::space): blocks are shared within a space only.
//
// Sliding windows: when every layer of a model attends to at most its last `window`
// positions, a running sequence's blocks that no later query can see are released
// (release_before) and their entries name null_block(), one past the pool's own blocks: the
// model runner keeps a block of zeros under that id (PagedTransformer), so the attention
// kernels, which may read positions before a window and give them probability 0, read zeros
// there. A sequence then holds its window's blocks, not its whole context's.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace tokenmill {

struct BlockTable {
  std::vector<int32_t> blocks;
  int64_t released_blocks = 0;   // leading entries released by release_before (null_block())
  int64_t committed_blocks = 0;  // leading blocks already registered in the prefix cache
  uint64_t chain_hash = 0;       // hash chain value at the end of the committed blocks
  uint32_t space = 0;            // prefix space (set before match_prefix; release keeps it)
};

// One step of the hash chain: mixes the chain value before a block with the block's tokens,
// in order (a splitmix64 finalizer per token; see block_manager.cpp).
uint64_t hash_block_tokens(uint64_t parent, std::span<const int32_t> tokens);
using BlockHash = uint64_t (*)(uint64_t parent, std::span<const int32_t> tokens);

class BlockManager {
 public:
  // Throws Error unless 1 <= num_blocks <= 2^31 - 1 and block_size is a power of two.
  // `hash` computes the chain; a test may pass a weak one to force collisions.
  BlockManager(int64_t num_blocks, int64_t block_size, bool prefix_caching,
               BlockHash hash = hash_block_tokens);

  int64_t num_blocks() const;
  int64_t block_size() const;
  // Blocks held by at least one sequence.
  int64_t used_blocks() const;
  // Blocks reserve() can still hand out: never used, or cached with no reference (evictable).
  int64_t available_blocks() const;
  // Blocks needed to hold `tokens` positions.
  int64_t blocks_for(int64_t tokens) const;

  // For an empty table: takes (one reference on each) the longest run of cached blocks that
  // hold a prefix of `tokens`, leaving at least the last token to compute (at most
  // (tokens.size() - 1) / block_size blocks). Returns the number of tokens covered (a
  // multiple of block_size). Without prefix caching: 0.
  int64_t match_prefix(std::span<const int32_t> tokens, BlockTable& table);

  // Grows `table` to hold `total_tokens` positions, taking never-used blocks first, then
  // evicting the least recently released cached ones. Returns false, changing nothing, when
  // too few blocks are available.
  bool reserve(BlockTable& table, int64_t total_tokens);

  // Tokens [0, computed) of the sequence (`tokens` holds at least that many) now have their
  // KV in the table's blocks: registers each newly full block in the prefix cache (a block
  // whose chain is already cached under another id stays private to this sequence).
  void commit(BlockTable& table, std::span<const int32_t> tokens, int64_t computed);

  // Drops the table's references and empties it. A block with no reference left stays
  // cached (evictable) if registered, else becomes free.
  void release(BlockTable& table);

  // Drops the table's references to the blocks wholly before `position` (a sliding window's
  // start: no later query of the sequence sees them), as release() does, and makes their
  // entries null_block(). With prefix caching the last committed block is kept (the next
  // commit chains from it).
  void release_before(BlockTable& table, int64_t position);
  // The id of released entries: num_blocks(), the model runner's block of zeros.
  int32_t null_block() const { return static_cast<int32_t>(num_blocks_); }

 private:
  // A registered block also records which registration precedes it in its chain, so that a
  // lookup accepts it only after the very block matched just before: equal tokens are not
  // enough when the hashes of two different prefixes collide.
  struct Block {
    int32_t refs = 0;
    int32_t lru_prev = -1, lru_next = -1;  // neighbours in the evictable list
    uint64_t serial = 0;                   // registration number (never reused), 0 if unregistered
    uint64_t hash = 0;                     // key in cached_ while registered
    uint64_t parent = 0;  // serial of the registration before it; at a chain's start its space's root
    // For a committed block: the registration that holds the chain ending here (its own, or
    // an identical block's when it stayed private), kBrokenChain when none does.
    uint64_t chain = 0;
  };

  std::span<const int32_t> block_tokens(int32_t id) const;
  // Drops one reference to block `id` (release's step).
  void drop_reference(int32_t id);
  // Whether registered block `id` follows registration `parent` and holds `tokens`.
  bool holds(int32_t id, uint64_t parent, std::span<const int32_t> tokens) const;
  // Hands out one block (reference count 1): a free one, else the least recently released
  // cached one, which loses its registration. The caller has checked available_blocks().
  int32_t take_block();
  void lru_push_back(int32_t id);
  void lru_remove(int32_t id);

  int64_t num_blocks_, block_size_;
  bool prefix_caching_;
  BlockHash hash_;
  std::vector<Block> blocks_;
  std::vector<int32_t> tokens_;            // block b's tokens at [b * block_size, (b + 1) * block_size)
  std::vector<int32_t> free_;              // blocks holding nothing; the next one handed out is at the back
  int32_t lru_head_ = -1, lru_tail_ = -1;  // evictable blocks, least recently released first
  int64_t lru_size_ = 0;
  std::unordered_map<uint64_t, int32_t> cached_;  // chain hash -> registered block
  uint64_t next_serial_ = 1;
  int64_t used_ = 0;
};

}  // namespace tokenmill
