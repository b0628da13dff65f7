// Where attention finds its query rows and its cache rows, for contiguous caches and paged
// pools alike (Backend::attention, Backend::paged_attention):
//  - work row i of a launch is one query row: the row of q and out it reads and writes, the
//    position it sits at (it attends to positions [0, position]) and its block table;
//  - position p of a cache is row p of a contiguous cache, or row p % block_size of block
//    table[p / block_size] of a pool (block_size = 2^block_shift).
// One kernel serves both through these rules, so contiguous and paged attention visit the
// same elements in the same order: bit-identical results (paged_layout.h builds the paged
// work on the host).
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace tokenmill::cuda {

// One query row of a paged launch.
struct QueryRow {
  int64_t q_row = 0;     // the row of q and out
  int64_t position = 0;  // attends to positions [0, position]
  int64_t table = 0;     // where its block table starts in AttentionWork::tables
};

// The query rows of one launch. Contiguous: rows == nullptr, work row i is q row i at
// position first_pos + i, caches addressed by position. Paged: rows[i] (device memory), its
// block table at tables + rows[i].table (device memory).
struct AttentionWork {
  const QueryRow* rows = nullptr;
  int64_t first_pos = 0;
  const int32_t* tables = nullptr;
  int block_shift = 0;  // log2(block_size)
};

// Work row i of `work`, and the block table it reads through (null: contiguous).
TM_HOST_DEVICE QueryRow query_row(const AttentionWork& work, int64_t i) {
  if (work.rows == nullptr) return QueryRow{i, work.first_pos + i, 0};
  return work.rows[i];
}
TM_HOST_DEVICE const int32_t* block_table(const AttentionWork& work, const QueryRow& row) {
  return work.rows == nullptr ? nullptr : work.tables + row.table;
}

// The cache row of position p: p itself without a block table, else row p % 2^block_shift of
// block table[p >> block_shift] (slot = block * block_size + row in block).
TM_HOST_DEVICE int64_t cache_row(const int32_t* table, int block_shift, int64_t p) {
  if (table == nullptr) return p;
  const int64_t in_block = p & ((int64_t{1} << block_shift) - 1);
  return (static_cast<int64_t>(table[p >> block_shift]) << block_shift) + in_block;
}

}  // namespace tokenmill::cuda
