#include "backend/cpu/cpu_attention.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <utility>
#include <vector>

#include "backend/cpu/grain.h"
#include "backend/cpu/scratch.h"
#include "backend/cpu/shape_checks.h"
#include "core/error.h"
#include "core/parallel.h"

namespace tokenmill::cpu {

namespace {

// Per thread, as in cpu_backend.cpp: the caller's buffers are read by the workers of the
// parallel region it starts.
thread_local Scratch tl_rounded_q;                                    // caller: q rounded to f16
thread_local Scratch tl_worker_scores;                                // worker: scores of one work item
thread_local std::vector<AttentionArgs> tl_sequences;                 // caller: a batch's sequences
thread_local std::vector<int64_t> tl_sequence_ends;                   // caller: their running token counts
thread_local std::vector<std::pair<int64_t, int64_t>> tl_row_ranges;  // caller: (first_row, rows)
thread_local std::vector<int64_t> tl_sorted_slots;                    // caller: store_kv's slots

// The checks attention and paged_attention share: q [n, heads, head_dim] f32; k and v of one
// plain dtype and one shape of `rank` dimensions ending in [kv_heads, head_dim], with heads a
// multiple of kv_heads; out f32 with q's elements and n rows, overlapping nothing.
void check_attention(const char* op, const Tensor& q, const Named& k, const Named& v, int rank,
                     const Tensor& out) {
  const Tensor& kt = *k.tensor;
  const Tensor& vt = *v.tensor;
  expect_f32(op, "q", q);
  expect_rank(op, "q", q, 3);
  expect_rank(op, k.name, kt, rank);
  expect_rank(op, v.name, vt, rank);
  expect_data(op, k.name, kt);
  expect_data(op, v.name, vt);
  expect_f32(op, "out", out);
  const int64_t n = q.dim(0), heads = q.dim(1), hd = q.dim(2), kv_heads = kt.dim(-2);
  if (is_quantized(kt.dtype)) fail("{}: a {} {} is not supported (f32, bf16, f16)", op, describe(kt), k.name);
  if (kt.shape != vt.shape || kt.dtype != vt.dtype)
    fail("{}: {} {} and {} {} must have the same shape and dtype", op, k.name, describe(kt), v.name,
         describe(vt));
  if (kt.dim(-1) != hd)
    fail("{}: q {} has head_dim {} but {} {} has {}", op, describe(q), hd, k.name, describe(kt), kt.dim(-1));
  if (kv_heads < 1 || heads % kv_heads != 0)
    fail("{}: {} query heads cannot share {} kv heads evenly", op, heads, kv_heads);
  if (out.numel() != q.numel() || (out.rank > 0 && out.dim(0) != n))
    fail("{}: out is {} but q is {}; out must hold [{}, {}, {}]", op, describe(out), describe(q), n, heads,
         hd);
  expect_disjoint(op, "out", out, "q", q);
  expect_disjoint(op, "out", out, k.name, kt);
  expect_disjoint(op, "out", out, v.name, vt);
}

// The kernel arguments for all rows of q (checked) over caches k and v, positions not set.
// With an f16 cache q is rounded to f16 first: f16 x f16 products (Backend::attention).
AttentionArgs batch_args(const Tensor& q, const Tensor& k, const Tensor& v, float scale, const Tensor& out) {
  AttentionArgs a;
  a.q = q.as<const float>();
  if (k.dtype == DType::F16) {
    float* rounded = tl_rounded_q.floats(q.numel());
    int64_t i = 0;
    for (; i + 8 <= q.numel(); i += 8)  // F16C is part of the x86-64-v3 baseline
      _mm256_storeu_ps(rounded + i,
                       _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(a.q + i), _MM_FROUND_TO_NEAREST_INT)));
    for (; i < q.numel(); ++i) rounded[i] = f16_to_f32(f32_to_f16(a.q[i]));
    a.q = rounded;
  }
  a.k_cache = k.data;
  a.v_cache = v.data;
  a.cache_dtype = k.dtype;
  a.out = out.as<float>();
  a.n = q.dim(0);
  a.n_heads = q.dim(1);
  a.n_kv_heads = k.dim(-2);
  a.head_dim = q.dim(2);
  a.scale = scale;
  return a;
}

// Runs the attention kernel for every token of `sequences` (at least one, each with n >= 1;
// one q, out and cache layout, each its own rows, positions and block table).
void run_attention(const KernelTable& kernels, std::span<const AttentionArgs> sequences) {
  const AttentionArgs& any = sequences.front();
  const int64_t heads = any.n_heads, kv_heads = any.n_kv_heads, hd = any.head_dim;
  std::vector<int64_t>& ends = tl_sequence_ends;  // the caller's, read by the workers
  ends.clear();
  int64_t tokens = 0, causal_work = 0, max_len = 0;
  for (const AttentionArgs& a : sequences) {
    tokens += a.n;
    ends.push_back(tokens);
    causal_work += a.n * (a.first_pos + (a.n + 1) / 2);
    max_len = std::max(max_len, a.first_pos + a.n);
  }
  // Work item: (sequence, token, a slice of one kv head's query heads), over the whole batch.
  // Whole groups read each cache row once for all their heads; groups are split only when
  // there are too few items to keep every thread busy. A sequence's tokens are visited in
  // the order 0, n-1, 1, n-2, ... so the contiguous chunks of parallel_for_chunks get
  // similar causal lengths. The split changes no result: each head's arithmetic is fixed.
  const int64_t group = heads / kv_heads;
  const int64_t want = 4 * static_cast<int64_t>(thread_count());
  int64_t splits = (want + tokens * kv_heads - 1) / (tokens * kv_heads);
  if (splits > group) splits = group;
  if (splits < 1) splits = 1;
  const int64_t slice = (group + splits - 1) / splits;  // heads per item
  const int64_t slices = (group + slice - 1) / slice;   // items per (token, kv head)
  const int64_t items_per_token = kv_heads * slices;
  const int64_t grain = grain_for(slice * hd * (causal_work / tokens), kMinMatmulWork / 4);
  parallel_for_chunks(tokens * items_per_token, grain, [&](int64_t i0, int64_t i1) {
    float* scores = tl_worker_scores.floats(slice * max_len + 4);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t token = i / items_per_token, item = i % items_per_token;
      const auto s = static_cast<size_t>(std::upper_bound(ends.begin(), ends.end(), token) - ends.begin());
      const AttentionArgs& a = sequences[s];
      const int64_t order = token - (ends[s] - a.n);
      const int64_t t = order % 2 == 0 ? order / 2 : a.n - 1 - order / 2;
      const int64_t h0 = (item / slices) * group + (item % slices) * slice;
      const int64_t h1 = h0 + slice < (item / slices + 1) * group ? h0 + slice : (item / slices + 1) * group;
      kernels.attention(a, t, h0, h1, scores);
    }
  });
}

// Row ranges inside [0, n) and pairwise disjoint; block tables long enough for positions
// [0, first_pos + rows), every block id they use for those inside [0, num_blocks).
void check_sequences(const char* op, std::span<const Backend::PagedSequence> sequences, int64_t n,
                     int64_t num_blocks, int64_t block_size) {
  std::vector<std::pair<int64_t, int64_t>>& ranges = tl_row_ranges;
  ranges.clear();
  for (size_t s = 0; s < sequences.size(); ++s) {
    const Backend::PagedSequence& seq = sequences[s];
    if (seq.first_row < 0 || seq.rows < 0 || seq.first_row > n - seq.rows)
      fail("{}: sequence {} owns {} rows from row {}, outside the {} rows of q", op, s, seq.rows,
           seq.first_row, n);
    const int64_t table = static_cast<int64_t>(seq.blocks.size());
    if (seq.first_pos < 0 || seq.first_pos > table * block_size - seq.rows)
      fail(
          "{}: sequence {} at first_pos {} with {} rows does not fit its block table of {} blocks of {} "
          "positions; allocate its blocks before the call",
          op, s, seq.first_pos, seq.rows, table, block_size);
    const int64_t used = (seq.first_pos + seq.rows + block_size - 1) / block_size;
    for (int64_t b = 0; b < used; ++b) {
      const int32_t id = seq.blocks[static_cast<size_t>(b)];
      if (id < 0 || id >= num_blocks)
        fail("{}: entry {} of sequence {}'s block table is block {}, outside the pool of {} blocks", op, b, s,
             id, num_blocks);
    }
    if (seq.rows > 0) ranges.emplace_back(seq.first_row, seq.rows);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i - 1].first + ranges[i - 1].second > ranges[i].first)
      fail("{}: query row {} is owned by two sequences; row ranges must not overlap", op, ranges[i].first);
}

}  // namespace

void attention(const KernelTable& kernels, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               int64_t first_pos, float scale, const Tensor& out) {
  const char* op = "attention";
  check_attention(op, q, {"k_cache", k_cache}, {"v_cache", v_cache}, 3, out);
  const int64_t n = q.dim(0), capacity = k_cache.dim(0);
  if (first_pos < 0 || first_pos > capacity - n)
    fail("{}: {} positions from {} do not fit the cache capacity {}", op, n, first_pos, capacity);
  if (n == 0 || q.dim(1) == 0 || q.dim(2) == 0) return;
  AttentionArgs a = batch_args(q, k_cache, v_cache, scale, out);
  a.first_pos = first_pos;
  run_attention(kernels, std::span(&a, 1));
}

void paged_attention(const KernelTable& kernels, const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                     std::span<const Backend::PagedSequence> sequences, float scale, const Tensor& out) {
  const char* op = "paged_attention";
  check_attention(op, q, {"k_pool", k_pool}, {"v_pool", v_pool}, 4, out);
  const int64_t n = q.dim(0), heads = q.dim(1), hd = q.dim(2), block_size = k_pool.dim(1);
  if (block_size < 1 || !std::has_single_bit(static_cast<uint64_t>(block_size)))
    fail("{}: the pools {} have blocks of {} positions; the block size must be a power of two", op,
         describe(k_pool), block_size);
  check_sequences(op, sequences, n, k_pool.dim(0), block_size);
  if (n == 0 || heads == 0 || hd == 0) return;
  const AttentionArgs batch = batch_args(q, k_pool, v_pool, scale, out);
  std::vector<AttentionArgs>& list = tl_sequences;
  list.clear();
  for (const Backend::PagedSequence& seq : sequences) {
    if (seq.rows == 0) continue;
    AttentionArgs a = batch;
    a.q += seq.first_row * heads * hd;
    a.out += seq.first_row * heads * hd;
    a.n = seq.rows;
    a.first_pos = seq.first_pos;
    a.blocks = seq.blocks.data();
    a.block_shift = std::countr_zero(static_cast<uint64_t>(block_size));
    list.push_back(a);
  }
  if (!list.empty()) run_attention(kernels, list);
}

void store_kv(const Tensor& rows, std::span<const int64_t> slots, const Tensor& pool) {
  const char* op = "store_kv";
  expect_f32(op, "rows", rows);
  expect_rank(op, "rows", rows, 3);
  expect_rank(op, "pool", pool, 4);
  expect_data(op, "pool", pool);
  if (is_quantized(pool.dtype)) fail("{}: a {} pool is not supported (f32, bf16, f16)", op, describe(pool));
  if (rows.dim(1) != pool.dim(2) || rows.dim(2) != pool.dim(3))
    fail("{}: rows {} do not fit the pool {}: each row must be [{}, {}]", op, describe(rows), describe(pool),
         pool.dim(2), pool.dim(3));
  const int64_t n = rows.dim(0), pool_slots = pool.dim(0) * pool.dim(1);
  if (static_cast<int64_t>(slots.size()) != n)
    fail("{}: {} slots for rows {}; need one slot per row", op, slots.size(), describe(rows));
  expect_disjoint(op, "pool", pool, "rows", rows);
  for (const int64_t slot : slots)
    if (slot < 0 || slot >= pool_slots)
      fail("{}: slot {} is outside the pool {} of {} slots", op, slot, describe(pool), pool_slots);
  std::vector<int64_t>& sorted = tl_sorted_slots;
  sorted.assign(slots.begin(), slots.end());
  std::sort(sorted.begin(), sorted.end());
  const auto twice = std::adjacent_find(sorted.begin(), sorted.end());
  if (twice != sorted.end()) fail("{}: slot {} is written twice; slots must be distinct", op, *twice);
  const int64_t width = rows.dim(1) * rows.dim(2);
  const float* x = rows.as<const float>();
  parallel_for_chunks(n, grain_for(width, kMinElementwiseWork), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const auto first = static_cast<size_t>(slots[static_cast<size_t>(r)] * width);
      for (int64_t e = 0; e < width; ++e)
        store_from_f32(pool.data, pool.dtype, first + static_cast<size_t>(e), x[r * width + e]);
    }
  });
}

}  // namespace tokenmill::cpu
