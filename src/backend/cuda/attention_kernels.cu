#include <type_traits>

#include "backend/cuda/activation_math.h"
#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/attention_math.h"
#include "backend/cuda/block_reduce.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/grid_stride.cuh"

namespace tokenmill::cuda {

namespace {

constexpr int kLanes = 32;
constexpr int kChunks = static_cast<int>(kMaxAttentionHeadDim) / kLanes;  // head elements per lane

// A head row in a warp's registers: lane l holds elements l + 32 c (0 past head_dim), as
// cache_operand(x, f16) (the f16 rule of Backend::attention).
template <class T>
__device__ void load_head(const T* x, int64_t hd, bool f16, float (&r)[kChunks]) {
  const int lane = threadIdx.x % kLanes;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int64_t d = lane + kLanes * c;
    r[c] = d < hd ? cache_operand(to_float(x[d]), f16) : 0.0f;
  }
}

// x . y over a head, x in the warp's registers (load_head), y in memory. Every lane gets the
// same bits, and the order of the sum depends on head_dim only (fmaf(a, b, c) = fmaf(b, a, c),
// so which operand sits in registers does not matter either).
template <class T>
__device__ float warp_dot(const float (&x)[kChunks], const T* y, int64_t hd) {
  const int lane = threadIdx.x % kLanes;
  float partial = 0.0f;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int64_t d = lane + kLanes * c;
    if (d < hd) partial = fmaf(x[c], to_float(y[d]), partial);
  }
  return warp_reduce(partial, SumOp{});
}

// The score scale * (x . y), rounded on its own (never fused into what follows), so that every
// pass and kernel that recomputes a score gets the same bits.
template <class T>
__device__ float warp_score(const float (&x)[kChunks], const T* y, int64_t hd, float scale) {
  return __fmul_rn(warp_dot(x, y, hd), scale);
}

// softcap > 0: softcap * tanh(score / softcap), each step rounded on its own; else score.
__device__ float capped_score(float score, float softcap) {
  return softcap > 0.0f ? __fmul_rn(tanhf(__fdiv_rn(score, softcap)), softcap) : score;
}

// d(capped_score)/d(score) from the capped score c: 1 - (c / softcap)^2 (without cancellation:
// activation_math.h's softcap_gradient), or 1 without a cap.
__device__ float capped_score_slope(float capped, float softcap) {
  return softcap > 0.0f ? softcap_gradient(capped, softcap, 1.0f) : 1.0f;
}

// A forward score of launch `a`: warp_score, then soft-capped when a.softcap > 0.
template <class T>
__device__ float forward_score(const float (&x)[kChunks], const T* y, const AttentionLaunch& a) {
  return capped_score(warp_score(x, y, a.head_dim, a.scale), a.softcap);
}

// acc += w y over the lane's head elements (y in memory).
template <class T>
__device__ void warp_axpy(float w, const T* y, int64_t hd, float (&acc)[kChunks]) {
  const int lane = threadIdx.x % kLanes;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int64_t d = lane + kLanes * c;
    if (d < hd) acc[c] = fmaf(w, to_float(y[d]), acc[c]);
  }
}

// Every thread gets the merge of the warps' states, in warp order. `shared` holds one state per warp.
__device__ SoftmaxState merge_warps(SoftmaxState mine, SoftmaxState* shared) {
  __syncthreads();  // an earlier call's readers are done with shared
  if (threadIdx.x % kLanes == 0) shared[threadIdx.x / kLanes] = mine;
  __syncthreads();
  SoftmaxState all = shared[0];
  for (int w = 1; w < kAttentionWarps; ++w) all = softmax_merge(all, shared[w]);
  return all;
}

// dst[d] = factor * (sum over the warps of their acc, in warp order) for d < hd. `partial`
// holds kAttentionWarps head rows.
__device__ void store_warp_sum(const float (&acc)[kChunks], float factor, int64_t hd,
                               float (*partial)[kMaxAttentionHeadDim], float* dst) {
  const int lane = threadIdx.x % kLanes, warp = threadIdx.x / kLanes;
  __syncthreads();  // an earlier call's readers are done with partial
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int64_t d = lane + kLanes * c;
    if (d < hd) partial[warp][d] = acc[c];
  }
  __syncthreads();
  for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) {
    float sum = partial[0][d];
    for (int w = 1; w < kAttentionWarps; ++w) sum += partial[w][d];
    dst[d] = sum * factor;
  }
}

// Work item `item` = (work row, head) of launch `a`: where its query, cache rows and output are.
template <class T>
struct HeadItem {
  QueryRow row;
  int64_t at;  // offset of the head's row in q and out
  const int32_t* table;
  const T *k, *v;  // the kv head's first element in the caches
  int64_t row_stride;
  int block_shift;
  int64_t first;  // the first position the row attends to (its window's)

  __device__ HeadItem(const AttentionLaunch& a, int64_t item)
      : row(query_row(a.work, item / a.heads)),
        at((row.q_row * a.heads + item % a.heads) * a.head_dim),
        table(block_table(a.work, row)),
        k(static_cast<const T*>(a.k) + kv_head_of(item % a.heads, a.heads, a.kv_heads) * a.head_dim),
        v(static_cast<const T*>(a.v) + kv_head_of(item % a.heads, a.heads, a.kv_heads) * a.head_dim),
        row_stride(a.kv_heads * a.head_dim),
        block_shift(a.work.block_shift),
        first(row.position + 1 - attended_positions(row.position, a.window)) {}

  // How many positions the row attends to, from `first`; its splits' ranges.
  __device__ int64_t positions() const { return row.position + 1 - first; }
  __device__ PositionRange split(int64_t s) const {
    const PositionRange r = split_range(positions(), s);
    return {first + r.begin, first + r.end};
  }
  __device__ int64_t cache_offset(int64_t p) const { return cache_row(table, block_shift, p) * row_stride; }
};

// The softmax state of the scores of positions [r.begin, r.end), warp w taking r.begin + w,
// r.begin + w + kAttentionWarps, ..., merged over the warps in order (every thread gets it).
template <class T>
__device__ SoftmaxState range_state(const HeadItem<T>& it, const float (&q)[kChunks], PositionRange r,
                                    const AttentionLaunch& a, SoftmaxState* shared) {
  SoftmaxState state = softmax_empty();
  for (int64_t p = r.begin + threadIdx.x / kLanes; p < r.end; p += kAttentionWarps)
    state = softmax_add(state, forward_score(q, it.k + it.cache_offset(p), a));
  return merge_warps(state, shared);
}

// acc += probability * value over positions [r.begin, r.end), walked as range_state walks
// them; `all` holds every score of the row.
template <class T>
__device__ void range_values(const HeadItem<T>& it, const float (&q)[kChunks], PositionRange r,
                             SoftmaxState all, const AttentionLaunch& a, float (&acc)[kChunks]) {
  constexpr bool kF16 = std::is_same_v<T, __half>;
  for (int64_t p = r.begin + threadIdx.x / kLanes; p < r.end; p += kAttentionWarps) {
    const float score = forward_score(q, it.k + it.cache_offset(p), a);
    warp_axpy(cache_operand(softmax_probability(score, all), kF16), it.v + it.cache_offset(p), a.head_dim,
              acc);
  }
}

// `all`, the state of every score of the row of head `head`, with the head's sink added to the
// softmax's denominator when the launch has sinks (Backend::AttentionScores).
__device__ SoftmaxState with_sink(SoftmaxState all, const AttentionLaunch& a, int64_t head) {
  return a.sinks != nullptr ? softmax_add(all, a.sinks[head]) : all;
}

// Rows of one split. Pass 1: the softmax state of the row's scores; pass 2: the probabilities
// (recomputed scores, same bits) times the value rows.
template <class T>
__global__ void __launch_bounds__(kAttentionThreads) attention_kernel(AttentionLaunch a) {
  __shared__ SoftmaxState states[kAttentionWarps];
  __shared__ float partial[kAttentionWarps][kMaxAttentionHeadDim];
  for (int64_t item = blockIdx.x; item < a.work_rows * a.heads; item += gridDim.x) {
    const HeadItem<T> it(a, item);
    if (attention_splits(it.positions()) > 1) continue;  // the split kernels' row
    float q[kChunks];
    load_head(a.q + it.at, a.head_dim, std::is_same_v<T, __half>, q);
    const PositionRange all_positions{it.first, it.first + it.positions()};
    const SoftmaxState all = with_sink(range_state(it, q, all_positions, a, states), a, item % a.heads);
    float acc[kChunks] = {};
    range_values(it, q, all_positions, all, a, acc);
    store_warp_sum(acc, 1.0f, a.head_dim, partial, a.out + it.at);
  }
}

// The split rows among work rows [first_row, first_row + rows) of a launch, and their scratch:
// per (row - first_row, head, split) = (item, split) a softmax state and a head row of sums.
struct SplitLaunch {
  AttentionLaunch a;
  int64_t first_row = 0, rows = 0, max_splits = 1;
  SoftmaxState* states = nullptr;  // [rows * heads * max_splits]
  float* sums = nullptr;           // [rows * heads * max_splits, head_dim]
};

// Split pass 1, blocks (item, split = blockIdx.y): each split's softmax state.
template <class T>
__global__ void __launch_bounds__(kAttentionThreads) split_state_kernel(SplitLaunch s) {
  __shared__ SoftmaxState states[kAttentionWarps];
  const AttentionLaunch& a = s.a;
  for (int64_t item = blockIdx.x; item < s.rows * a.heads; item += gridDim.x) {
    const HeadItem<T> it(a, s.first_row * a.heads + item);
    const int64_t splits = attention_splits(it.positions()), split = blockIdx.y;
    if (splits == 1 || split >= splits) continue;
    float q[kChunks];
    load_head(a.q + it.at, a.head_dim, std::is_same_v<T, __half>, q);
    const SoftmaxState state = range_state(it, q, it.split(split), a, states);
    if (threadIdx.x == 0) s.states[item * s.max_splits + split] = state;
  }
}

// Split pass 2: the row's state from its splits' states in split order, then each split's
// sum of probability * value.
template <class T>
__global__ void __launch_bounds__(kAttentionThreads) split_values_kernel(SplitLaunch s) {
  __shared__ float partial[kAttentionWarps][kMaxAttentionHeadDim];
  const AttentionLaunch& a = s.a;
  for (int64_t item = blockIdx.x; item < s.rows * a.heads; item += gridDim.x) {
    const HeadItem<T> it(a, s.first_row * a.heads + item);
    const int64_t splits = attention_splits(it.positions()), split = blockIdx.y;
    if (splits == 1 || split >= splits) continue;
    SoftmaxState all = s.states[item * s.max_splits];
    for (int64_t j = 1; j < splits; ++j) all = softmax_merge(all, s.states[item * s.max_splits + j]);
    all = with_sink(all, a, item % a.heads);
    float q[kChunks];
    load_head(a.q + it.at, a.head_dim, std::is_same_v<T, __half>, q);
    float acc[kChunks] = {};
    range_values(it, q, it.split(split), all, a, acc);
    store_warp_sum(acc, 1.0f, a.head_dim, partial, s.sums + (item * s.max_splits + split) * a.head_dim);
  }
}

// Split pass 3, element i = (item, d): out = the splits' sums added in split order.
struct SplitSum {
  SplitLaunch s;
  __device__ void operator()(int64_t i) const {
    const AttentionLaunch& a = s.a;
    const int64_t item = i / a.head_dim, d = i % a.head_dim;
    const QueryRow row = query_row(a.work, s.first_row + item / a.heads);
    const int64_t splits = attention_splits(attended_positions(row.position, a.window));
    if (splits == 1) return;
    const float* sums = s.sums + item * s.max_splits * a.head_dim + d;
    float sum = sums[0];
    for (int64_t j = 1; j < splits; ++j) sum += sums[j * a.head_dim];
    a.out[(row.q_row * a.heads + item % a.heads) * a.head_dim + d] = sum;
  }
};

// Element i of store_kv's rows to its slot of the pool.
template <class T>
struct StoreKvElement {
  const float* rows;
  const int64_t* slots;
  int64_t width;
  T* pool;
  __device__ void operator()(int64_t i) const {
    const int64_t r = i / width;
    pool[slots[r] * width + (i - r * width)] = from_float<T>(rows[i]);
  }
};

// ---------------------------------------------------------------- backward
//
// Per query t, head h, over the positions p its window lets it see (P = softmax of the
// scores, recomputed):
//   D = dout_t . out_t,  dS_p = P_p (dout_t . v_p - D) S'_p  (S'_p = 1, or with a soft cap
//   1 - (S_p / cap)^2, S_p the capped score),
//   dq_t = scale sum_p dS_p k_p,  dk_p = scale sum_{t, h in p's group} dS_p q_t,  dv_p = sum P_p dout_t.
// The dq pass (work item = (t, h)) also stores each row's softmax state and D; the dk/dv
// pass (work item = (p, kv head)) walks the group's heads in order, and each head's queries
// t >= p as the forward walks positions. No atomics.

__global__ void __launch_bounds__(kAttentionThreads) attention_dq_kernel(AttentionBackwardLaunch a) {
  __shared__ SoftmaxState states[kAttentionWarps];
  __shared__ float partial[kAttentionWarps][kMaxAttentionHeadDim];
  auto* stats = static_cast<AttentionRowStats*>(a.scratch);
  const int warp = threadIdx.x / kLanes;
  const int64_t hd = a.head_dim, row_stride = a.kv_heads * hd;
  for (int64_t item = blockIdx.x; item < a.n * a.heads; item += gridDim.x) {
    const int64_t t = item / a.heads, h = item % a.heads, at = item * hd;
    const int64_t kv = kv_head_of(h, a.heads, a.kv_heads) * hd;
    float q[kChunks], dout[kChunks];
    load_head(a.q + at, hd, false, q);
    load_head(a.dout + at, hd, false, dout);
    const float expected_dp = warp_dot(dout, a.out + at, hd);

    const int64_t first = t + 1 - attended_positions(t, a.window);
    SoftmaxState state = softmax_empty();
    for (int64_t p = first + warp; p <= t; p += kAttentionWarps)
      state =
          softmax_add(state, capped_score(warp_score(q, a.k + kv + p * row_stride, hd, a.scale), a.softcap));
    const SoftmaxState all = merge_warps(state, states);

    float acc[kChunks] = {};
    for (int64_t p = first + warp; p <= t; p += kAttentionWarps) {
      const float* k = a.k + kv + p * row_stride;
      const float score = capped_score(warp_score(q, k, hd, a.scale), a.softcap);
      const float prob = softmax_probability(score, all);
      const float ds = prob * (warp_dot(dout, a.v + kv + p * row_stride, hd) - expected_dp) *
                       capped_score_slope(score, a.softcap);
      warp_axpy(ds, k, hd, acc);
    }
    store_warp_sum(acc, a.scale, hd, partial, a.dq + at);
    if (threadIdx.x == 0) stats[item] = AttentionRowStats{all, expected_dp};
  }
}

__global__ void __launch_bounds__(kAttentionThreads) attention_dkdv_kernel(AttentionBackwardLaunch a) {
  __shared__ float partial[kAttentionWarps][kMaxAttentionHeadDim];
  const auto* stats = static_cast<const AttentionRowStats*>(a.scratch);
  const int warp = threadIdx.x / kLanes;
  const int64_t hd = a.head_dim, group = a.heads / a.kv_heads;
  for (int64_t item = blockIdx.x; item < a.n * a.kv_heads; item += gridDim.x) {
    const int64_t p = item / a.kv_heads, g = item % a.kv_heads, at = item * hd;
    float k[kChunks], v[kChunks];
    load_head(a.k + at, hd, false, k);
    load_head(a.v + at, hd, false, v);
    float dk[kChunks] = {}, dv[kChunks] = {};
    const int64_t end = a.window > 0 && p + a.window < a.n ? p + a.window : a.n;  // the queries that see p
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      for (int64_t t = p + warp; t < end; t += kAttentionWarps) {
        const int64_t row = t * a.heads + h;
        const float* q = a.q + row * hd;
        const float* dout = a.dout + row * hd;
        const AttentionRowStats s = stats[row];
        const float score = capped_score(warp_score(k, q, hd, a.scale), a.softcap);
        const float prob = softmax_probability(score, s.softmax);
        const float ds =
            prob * (warp_dot(v, dout, hd) - s.expected_dp) * capped_score_slope(score, a.softcap);
        warp_axpy(ds, q, hd, dk);
        warp_axpy(prob, dout, hd, dv);
      }
    }
    store_warp_sum(dk, a.scale, hd, partial, a.dk + at);
    store_warp_sum(dv, 1.0f, hd, partial, a.dv + at);
  }
}

}  // namespace

void launch_attention(const AttentionLaunch& a, const SplitPlan& plan, void* scratch, cudaStream_t stream) {
  const int64_t blocks = attention_blocks(a.work_rows * a.heads);
  if (blocks == 0 || a.head_dim == 0) return;
  with_storage_type(a.cache_dtype, "attention", [&](auto zero) {
    using T = decltype(zero);
    if (!plan.every_row_splits) {
      attention_kernel<T><<<static_cast<unsigned>(blocks), kAttentionThreads, 0, stream>>>(a);
      TM_CUDA_CHECK_LAUNCH();
    }
    if (plan.max_splits == 1) return;
    SplitLaunch s{.a = a, .max_splits = plan.max_splits};
    s.states = static_cast<SoftmaxState*>(scratch);
    s.sums = reinterpret_cast<float*>(s.states + plan.rows_per_chunk * a.heads * plan.max_splits);
    for (s.first_row = 0; s.first_row < a.work_rows; s.first_row += plan.rows_per_chunk) {
      s.rows = std::min(plan.rows_per_chunk, a.work_rows - s.first_row);
      const dim3 grid(static_cast<unsigned>(attention_blocks(s.rows * a.heads)),
                      static_cast<unsigned>(plan.max_splits));
      split_state_kernel<T><<<grid, kAttentionThreads, 0, stream>>>(s);
      TM_CUDA_CHECK_LAUNCH();
      split_values_kernel<T><<<grid, kAttentionThreads, 0, stream>>>(s);
      TM_CUDA_CHECK_LAUNCH();
      launch_elementwise(s.rows * a.heads * a.head_dim, SplitSum{s}, stream);
    }
  });
}

void launch_store_kv(const float* rows, const int64_t* slots, int64_t n, int64_t width, void* pool,
                     DType pool_dtype, cudaStream_t stream) {
  with_storage_type(pool_dtype, "store_kv", [&](auto zero) {
    using T = decltype(zero);
    launch_elementwise(n * width, StoreKvElement<T>{rows, slots, width, static_cast<T*>(pool)}, stream);
  });
}

size_t attention_backward_scratch_bytes(int64_t n, int64_t heads) {
  return static_cast<size_t>(n * heads) * sizeof(AttentionRowStats);
}

void launch_attention_backward(const AttentionBackwardLaunch& a, cudaStream_t stream) {
  if (a.n == 0 || a.heads == 0 || a.head_dim == 0) return;
  attention_dq_kernel<<<static_cast<unsigned>(attention_blocks(a.n * a.heads)), kAttentionThreads, 0,
                        stream>>>(a);
  TM_CUDA_CHECK_LAUNCH();
  attention_dkdv_kernel<<<static_cast<unsigned>(attention_blocks(a.n * a.kv_heads)), kAttentionThreads, 0,
                          stream>>>(a);
  TM_CUDA_CHECK_LAUNCH();
}

}  // namespace tokenmill::cuda
