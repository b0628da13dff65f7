#include "backend/cpu/cpu_attention.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <vector>

#include "backend/checks/attention_checks.h"
#include "backend/cpu/grain.h"
#include "backend/cpu/scratch.h"
#include "core/parallel.h"

namespace tokenmill::cpu {

namespace {

// Per thread, as in cpu_backend.cpp: the caller's buffers are read by the workers of the
// parallel region it starts.
thread_local Scratch tl_rounded_q;                     // caller: q rounded to f16
thread_local Scratch tl_worker_scores;                 // worker: one kernel call's scratch
thread_local std::vector<AttentionArgs> tl_sequences;  // caller: a batch's sequences
thread_local std::vector<int64_t> tl_sequence_ends;    // caller: their running token counts
thread_local Scratch tl_token_scores;                  // caller: a decode step's scores, shared
thread_local Scratch tl_segment_sums;                  // caller: its segment sums, shared

// The kernel arguments for all rows of q (checked) over caches k and v, positions not set.
// With an f16 cache q is rounded to f16 first: f16 x f16 products (Backend::attention).
AttentionArgs batch_args(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionScores& scores,
                         const Tensor& out) {
  AttentionArgs a;
  a.q = q.as<const float>();
  if (k.dtype == DType::F16) {
    const int64_t count = q.numel();
    float* rounded = tl_rounded_q.floats(count);
    int64_t i = 0;
    for (; i + 8 <= count; i += 8)  // F16C is part of the x86-64-v3 baseline
      _mm256_storeu_ps(rounded + i,
                       _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(a.q + i), _MM_FROUND_TO_NEAREST_INT)));
    for (; i < count; ++i) rounded[i] = f16_to_f32(f32_to_f16(a.q[i]));
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
  a.scale = scores.scale;
  a.window = scores.window;
  a.softcap = scores.softcap;
  a.sinks = scores.sinks != nullptr ? scores.sinks->as<const float>() : nullptr;
  return a;
}

// A decode step of one sequence splits its positions among the threads from this many on
// (attention_by_positions). SmolLM2's layout (9 query, 3 kv heads of 64, f16 cache), 2
// threads: at 3600 positions in a decode, attention 6.2-6.6 -> 5.0 ms a token; in
// BM_Attention 131-150 -> 98-120 us at 4096 and the same at 2048, while splitting 512 or
// 1024 positions was 2-3 us slower than splitting kv heads (its barriers and phases).
constexpr int64_t kSplitPositionsFrom = 2048;

// The segments of kAttentionValueSegment positions that `len` positions make (the last may
// be shorter).
int64_t value_segments(int64_t len) { return (len + kAttentionValueSegment - 1) / kAttentionValueSegment; }

// One token's attention (a decode step of one sequence) with its positions split among up to
// `threads` threads, in segments of kAttentionValueSegment (KernelTable::token_attention):
// each thread reads its segments' cache rows, all kv heads of a position together, rather
// than whole kv heads (a head's rows are a fraction of each cache row: a sparse, slow
// stream). Scores, then softmax by query head, then each segment's sums, then the segments'
// sums added in order: the bits of a one-thread step.
void attention_by_positions(const KernelTable& kernels, const AttentionArgs& a, int threads) {
  const int64_t len = a.first_pos + 1, kv_heads = a.n_kv_heads, group = a.n_heads / kv_heads;
  const int64_t width = a.n_heads * a.head_dim;
  const int64_t segments = value_segments(len);
  float* scores = tl_token_scores.floats(a.n_heads * len);  // the caller's, shared
  float* sums = tl_segment_sums.floats(segments * width);   // segment s's at sums + s * width
  const auto each_kv_head = [&](TokenPhase phase, int64_t p0, int64_t p1, float* out) {
    for (int64_t h = 0; h < kv_heads; ++h)
      kernels.token_attention(a, phase, h * group, (h + 1) * group, p0, p1, scores + h * group * len, out);
  };
  std::atomic<int> folding{0};  // the thread whose turn it is to add its segments' sums
  parallel_team(threads, [&](int t, int team) {
    const auto [s0, s1] = team_share(segments, t, team);
    for (int64_t s = s0; s < s1; ++s)
      each_kv_head(TokenPhase::Scores, s * kAttentionValueSegment, (s + 1) * kAttentionValueSegment, nullptr);
#pragma omp barrier
    const auto [h0, h1] = team_share(a.n_heads, t, team);
    for (int64_t h = h0; h < h1; ++h)
      kernels.token_attention(a, TokenPhase::Softmax, h, h + 1, 0, len, scores + h * len, nullptr);
#pragma omp barrier
    for (int64_t s = s0; s < s1; ++s)
      each_kv_head(TokenPhase::Values, s * kAttentionValueSegment, (s + 1) * kAttentionValueSegment,
                   sums + s * width);
    // Each thread adds its own segments' sums (still in its cache) to those of the threads
    // before it, in turn: 10-20% faster at 2048-4096 positions than a barrier and every
    // thread adding all segments' sums for a share of the elements.
    while (folding.load(std::memory_order_acquire) != t) _mm_pause();
    for (int64_t s = s0; s < s1; ++s)
      for (int64_t e = 0; e < width; ++e) a.out[e] = s == 0 ? sums[e] : a.out[e] + sums[s * width + e];
    folding.store(t + 1, std::memory_order_release);
  });
}

// Runs the attention kernel for every token of `sequences` (at least one, each with n >= 1;
// one q, out and cache layout, each its own rows, positions and block table).
void run_attention(const KernelTable& kernels, std::span<const AttentionArgs> sequences) {
  const AttentionArgs& any = sequences.front();
  const int64_t heads = any.n_heads, kv_heads = any.n_kv_heads, hd = any.head_dim;
  if (sequences.size() == 1 && any.n == 1 && any.first_pos + 1 >= kSplitPositionsFrom) {
    const int64_t segments = value_segments(any.first_pos + 1);
    const int64_t segment_work = heads * hd * kAttentionValueSegment;
    const int threads = parallel_threads(segments, grain_for(segment_work, kMinMatmulWork / 4));
    if (threads > 1) {
      attention_by_positions(kernels, any, threads);
      return;
    }
  }
  // One block size for all: the batch shares its cache and head layout, and a sequence of
  // one token is one block whatever the size.
  const AttentionArgs& most_tokens =
      *std::max_element(sequences.begin(), sequences.end(),
                        [](const AttentionArgs& x, const AttentionArgs& y) { return x.n < y.n; });
  const int64_t block_size = kernels.attention_block_tokens(most_tokens);
  std::vector<int64_t>& ends = tl_sequence_ends;  // the caller's, read by the workers
  ends.clear();
  int64_t tokens = 0, blocks = 0, causal_work = 0, max_len = 0, max_n = 0;
  for (const AttentionArgs& a : sequences) {
    tokens += a.n;
    blocks += (a.n + block_size - 1) / block_size;
    ends.push_back(blocks);
    causal_work += a.n * (a.first_pos + (a.n + 1) / 2);
    max_len = std::max(max_len, a.first_pos + a.n);
    max_n = std::max(max_n, a.n);
  }
  // Work item: (sequence, block of up to block_size tokens, a slice of one kv head's query
  // heads), over the whole batch. Whole groups read each cache row once for all their
  // heads; groups are split only when there are too few items to keep every thread busy.
  // A sequence's blocks are visited in the order 0, last, 1, last - 1, ... so the threads'
  // contiguous chunks get similar causal lengths. The split changes no result: each row's
  // arithmetic is fixed (KernelTable::attention).
  const int64_t group = heads / kv_heads;
  const int64_t want = 4 * static_cast<int64_t>(thread_count());
  int64_t splits = (want + blocks * kv_heads - 1) / (blocks * kv_heads);
  if (splits > group) splits = group;
  if (splits < 1) splits = 1;
  const int64_t slice = (group + splits - 1) / splits;  // heads per item
  const int64_t slices = (group + slice - 1) / slice;   // items per (block, kv head)
  const int64_t items_per_block = kv_heads * slices;
  const int64_t block_tokens = std::min(block_size, (tokens + blocks - 1) / blocks);
  const int64_t grain = grain_for(block_tokens * slice * hd * (causal_work / tokens), kMinMatmulWork / 4);
  parallel_for_balanced(blocks * items_per_block, grain, 1, [&](int64_t i0, int64_t i1) {
    float* scratch =
        tl_worker_scores.floats(attention_scratch_floats(std::min(block_size, max_n), group, max_len, hd));
    for (int64_t i = i0; i < i1;) {
      const int64_t block = i / items_per_block, item = i % items_per_block;
      const auto s = static_cast<size_t>(std::upper_bound(ends.begin(), ends.end(), block) - ends.begin());
      const AttentionArgs& a = sequences[s];
      const int64_t count = (a.n + block_size - 1) / block_size;
      const int64_t order = block - (ends[s] - count);
      const int64_t b = order % 2 == 0 ? order / 2 : count - 1 - order / 2;
      const int64_t t0 = b * block_size, t1 = std::min(a.n, t0 + block_size);
      // This thread's items of the block's kv head go in one call: the cache rows are read
      // once for all their heads.
      const int64_t kv_head = item / slices;
      const int64_t run_end = std::min(i1, i - item % slices + slices);
      const int64_t h0 = kv_head * group + (item % slices) * slice;
      const int64_t h1 = std::min(kv_head * group + ((run_end - 1) % items_per_block % slices + 1) * slice,
                                  (kv_head + 1) * group);
      kernels.attention(a, t0, t1, h0, h1, scratch);
      i = run_end;
    }
  });
}

}  // namespace

void attention(const KernelTable& kernels, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               int64_t first_pos, const AttentionScores& scores, const Tensor& out) {
  if (checks::check_attention(q, k_cache, v_cache, first_pos, scores, out).empty()) return;
  AttentionArgs a = batch_args(q, k_cache, v_cache, scores, out);
  a.first_pos = first_pos;
  run_attention(kernels, std::span(&a, 1));
}

void paged_attention(const KernelTable& kernels, const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                     std::span<const Backend::PagedSequence> sequences, const AttentionScores& scores,
                     const Tensor& out) {
  const checks::PagedAttentionDims d =
      checks::check_paged_attention(q, k_pool, v_pool, sequences, scores, out);
  if (d.empty()) return;
  const int64_t heads = d.heads, hd = d.head_dim, block_size = d.block_size;
  const AttentionArgs batch = batch_args(q, k_pool, v_pool, scores, out);
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

void store_kv(const KernelTable& kernels, const Tensor& rows, std::span<const int64_t> slots,
              const Tensor& pool) {
  const checks::StoreKvDims d = checks::check_store_kv(rows, slots, pool);
  const int64_t n = d.n, width = d.width;
  const float* x = rows.as<const float>();
  const size_t row_bytes = static_cast<size_t>(width) * dtype_size(pool.dtype);
  parallel_for_balanced(n, grain_for(width, kMinElementwiseWork), 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      kernels.convert_from_f32(
          x + r * width, width, pool.dtype,
          static_cast<char*>(pool.data) + static_cast<size_t>(slots[static_cast<size_t>(r)]) * row_bytes);
  });
}

}  // namespace tokenmill::cpu
