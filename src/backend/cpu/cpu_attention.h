// The CPU backend's KV cache ops: attention over a contiguous cache, paged attention over
// block pools, and stores into a pool (see Backend::attention, paged_attention, store_kv).
// Shapes are checked like the other ops (a mismatch throws Error); CpuBackend forwards its
// overrides here.
#pragma once

#include <cstdint>
#include <span>

#include "backend/backend.h"
#include "backend/cpu/kernels.h"

namespace tokenmill::cpu {

void attention(const KernelTable& kernels, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               int64_t first_pos, const AttentionScores& scores, const Tensor& out);
void paged_attention(const KernelTable& kernels, const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                     std::span<const Backend::PagedSequence> sequences, const AttentionScores& scores,
                     const Tensor& out);
void store_kv(const KernelTable& kernels, const Tensor& rows, std::span<const int64_t> slots,
              const Tensor& pool);

}  // namespace tokenmill::cpu
