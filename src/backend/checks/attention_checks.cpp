#include "backend/checks/attention_checks.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <utility>
#include <vector>

#include "backend/checks/shape_checks.h"
#include "core/error.h"

namespace tokenmill::checks {

namespace {

// Per thread: the checks allocate nothing once warm.
thread_local std::vector<std::pair<int64_t, int64_t>> tl_row_ranges;  // (first_row, rows)
thread_local std::vector<int64_t> tl_sorted_slots;

// The checks attention and paged_attention share: q [n, heads, head_dim] f32; k and v of one
// plain dtype and one shape of `rank` dimensions ending in [kv_heads, head_dim], with heads a
// multiple of kv_heads; out f32 with q's elements and n rows, overlapping nothing; the
// scores' sinks, if any, f32 [heads].
AttentionDims check_heads(const char* op, const Tensor& q, const Named& k, const Named& v, int rank,
                          const AttentionScores& scores, const Tensor& out) {
  const Tensor& kt = *k.tensor;
  const Tensor& vt = *v.tensor;
  expect_f32(op, "q", q);
  expect_rank(op, "q", q, 3);
  expect_rank(op, k.name, kt, rank);
  expect_rank(op, v.name, vt, rank);
  expect_data(op, k.name, kt);
  expect_data(op, v.name, vt);
  expect_f32(op, "out", out);
  const AttentionDims d{.n = q.dim(0), .heads = q.dim(1), .kv_heads = kt.dim(-2), .head_dim = q.dim(2)};
  if (is_quantized(kt.dtype)) fail("{}: a {} {} is not supported (f32, bf16, f16)", op, describe(kt), k.name);
  if (kt.shape != vt.shape || kt.dtype != vt.dtype)
    fail("{}: {} {} and {} {} must have the same shape and dtype", op, k.name, describe(kt), v.name,
         describe(vt));
  if (kt.dim(-1) != d.head_dim)
    fail("{}: q {} has head_dim {} but {} {} has {}", op, describe(q), d.head_dim, k.name, describe(kt),
         kt.dim(-1));
  if (d.kv_heads < 1 || d.heads % d.kv_heads != 0)
    fail("{}: {} query heads cannot share {} kv heads evenly", op, d.heads, d.kv_heads);
  if (out.numel() != q.numel() || (out.rank > 0 && out.dim(0) != d.n))
    fail("{}: out is {} but q is {}; out must hold [{}, {}, {}]", op, describe(out), describe(q), d.n,
         d.heads, d.head_dim);
  expect_disjoint(op, "out", out, "q", q);
  expect_disjoint(op, "out", out, k.name, kt);
  expect_disjoint(op, "out", out, v.name, vt);
  if (const Tensor* sinks = scores.sinks) {
    expect_f32(op, "sinks", *sinks);
    expect_rank(op, "sinks", *sinks, 1);
    expect_data(op, "sinks", *sinks);
    if (sinks->dim(0) != d.heads)
      fail("{}: sinks {} must hold one value per query head ({})", op, describe(*sinks), d.heads);
    expect_disjoint(op, "out", out, "sinks", *sinks);
  }
  return d;
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

AttentionDims check_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                              int64_t first_pos, const AttentionScores& scores, const Tensor& out) {
  const char* op = "attention";
  const AttentionDims d = check_heads(op, q, {"k_cache", k_cache}, {"v_cache", v_cache}, 3, scores, out);
  const int64_t capacity = k_cache.dim(0);
  if (first_pos < 0 || first_pos > capacity - d.n)
    fail("{}: {} positions from {} do not fit the cache capacity {}", op, d.n, first_pos, capacity);
  return d;
}

PagedAttentionDims check_paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                                         std::span<const Backend::PagedSequence> sequences,
                                         const AttentionScores& scores, const Tensor& out) {
  const char* op = "paged_attention";
  PagedAttentionDims d;
  static_cast<AttentionDims&>(d) = check_heads(op, q, {"k_pool", k_pool}, {"v_pool", v_pool}, 4, scores, out);
  d.num_blocks = k_pool.dim(0);
  d.block_size = k_pool.dim(1);
  if (d.block_size < 1 || !std::has_single_bit(static_cast<uint64_t>(d.block_size)))
    fail("{}: the pools {} have blocks of {} positions; the block size must be a power of two", op,
         describe(k_pool), d.block_size);
  check_sequences(op, sequences, d.n, d.num_blocks, d.block_size);
  return d;
}

StoreKvDims check_store_kv(const Tensor& rows, std::span<const int64_t> slots, const Tensor& pool) {
  const char* op = "store_kv";
  expect_f32(op, "rows", rows);
  expect_rank(op, "rows", rows, 3);
  expect_rank(op, "pool", pool, 4);
  expect_data(op, "pool", pool);
  if (is_quantized(pool.dtype)) fail("{}: a {} pool is not supported (f32, bf16, f16)", op, describe(pool));
  if (rows.dim(1) != pool.dim(2) || rows.dim(2) != pool.dim(3))
    fail("{}: rows {} do not fit the pool {}: each row must be [{}, {}]", op, describe(rows), describe(pool),
         pool.dim(2), pool.dim(3));
  const StoreKvDims d{.n = rows.dim(0), .width = rows.dim(1) * rows.dim(2)};
  const int64_t pool_slots = pool.dim(0) * pool.dim(1);
  if (static_cast<int64_t>(slots.size()) != d.n)
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
  return d;
}

AttentionDims check_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                       const Tensor& dout, const AttentionScores& scores, const Tensor& dq,
                                       const Tensor& dk, const Tensor& dv) {
  const char* op = "attention_backward";
  if (!std::isfinite(scores.scale) || scores.window < 0 || !std::isfinite(scores.softcap) ||
      scores.softcap < 0)
    fail("{}: scores need a finite scale, a window >= 0 and a finite soft cap >= 0 (got {}, {}, {})", op,
         scores.scale, scores.window, scores.softcap);
  if (scores.sinks != nullptr) fail("{}: attention sinks are not supported (a forward-only feature)", op);
  expect_f32(
      op, {{"q", q}, {"k", k}, {"v", v}, {"out", out}, {"dout", dout}, {"dq", dq}, {"dk", dk}, {"dv", dv}});
  expect_rank(op, "q", q, 3);
  expect_rank(op, "k", k, 3);
  expect_rank(op, "v", v, 3);
  const AttentionDims d{.n = q.dim(0), .heads = q.dim(1), .kv_heads = k.dim(1), .head_dim = q.dim(2)};
  if (k.shape != v.shape)
    fail("{}: k {} and v {} must have the same shape", op, k.shape_string(), v.shape_string());
  if (k.dim(0) != d.n || k.dim(2) != d.head_dim)
    fail("{}: k {} must hold [{}, kv_heads, {}] for q {}", op, k.shape_string(), d.n, d.head_dim,
         q.shape_string());
  if (d.kv_heads < 1 || d.heads % d.kv_heads != 0)
    fail("{}: {} query heads cannot share {} kv heads evenly", op, d.heads, d.kv_heads);
  // out, dout and dq hold q's elements, dk and dv k's, with the tokens as their first dimension.
  const auto expect_holds = [&](const Named& t, const Tensor& like) {
    if (t.tensor->numel() != like.numel() || t.tensor->rank == 0 || t.tensor->dim(0) != d.n)
      fail("{}: {} is {} but must hold [{}, {}, {}]", op, t.name, describe(*t.tensor), d.n, like.dim(1),
           d.head_dim);
  };
  expect_holds({"out", out}, q);
  expect_holds({"dout", dout}, q);
  expect_holds({"dq", dq}, q);
  expect_holds({"dk", dk}, k);
  expect_holds({"dv", dv}, k);
  expect_disjoint(op, {{"dq", dq}, {"dk", dk}, {"dv", dv}},
                  {{"q", q}, {"k", k}, {"v", v}, {"out", out}, {"dout", dout}});
  return d;
}

}  // namespace tokenmill::checks
