// The CPU kernel table: one set of function pointers per instruction set.
//
// Each kernel works on raw, already shape-checked pointers and a range of the work
// (rows, tokens, panels), so the caller (cpu_backend.cpp) owns validation, threading and
// scratch memory, and the kernel translation units contain nothing but SIMD leaf code.
// kernels_impl.h writes every kernel once, as a template over a SIMD wrapper type;
// kernels_avx2.cpp and kernels_avx512.cpp instantiate it for their ISA.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tokenmill::cpu {

// y[n, m] = x[n, k] . w[m, k]^T (+ bias[m]); all row-major and contiguous. The packed GEMM
// (not the GEMV) also takes either operand stored transposed, so the backward products
// need no transposed copies, and can add its product to y.
struct MatmulArgs {
  const float* x = nullptr;
  const void* w = nullptr;  // DType w_dtype; any alignment
  DType w_dtype = DType::F32;
  const float* bias = nullptr;  // [m] or null
  float* y = nullptr;
  int64_t n = 0, k = 0, m = 0;
  bool x_transposed = false;  // x stored as [k, n]
  bool w_transposed = false;  // w stored as [k, m] (f32, bf16 or f16)
  bool accumulate = false;    // y += x . w^T (no bias)
};

// Causal grouped-query attention of one sequence over its KV cache; see Backend::attention
// and Backend::paged_attention for the contract.
struct AttentionArgs {
  const float* q = nullptr;       // [n, n_heads, head_dim]
  const void* k_cache = nullptr;  // cache rows [.., n_kv_heads, head_dim] of cache_dtype
  const void* v_cache = nullptr;
  DType cache_dtype = DType::F32;
  float* out = nullptr;  // [n, n_heads, head_dim]
  int64_t n = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, first_pos = 0;
  float scale = 1.0f;
  // Backend::AttentionScores's window and softcap: softmax_scores applies them (0: none).
  int64_t window = 0;
  float softcap = 0.0f;
  // Backend::AttentionScores's sinks: head h's softmax adds exp(sinks[h] - max) to its
  // denominator (null: none).
  const float* sinks = nullptr;
  // Null: position p is cache row p. Else the caches are block pools and position p is
  // row blocks[p >> block_shift] * 2^block_shift + p % 2^block_shift (blocks of
  // 2^block_shift rows; every block id read must be inside the pool).
  const int32_t* blocks = nullptr;
  int block_shift = 0;
};

// KernelTable::attention stages the kv head's cache once per call when it has this many
// tokens or more (no result changes): with AVX-512 the keys transposed as f32, with AVX2 a
// 16-bit cache's keys as f32 rows; a 16-bit cache's values as f32 rows; with AMX (a
// sequence this long) an f16 cache's keys and values as tiles. With one token its heads
// read each cache row while it is in L1 anyway.
inline constexpr int64_t kAttentionStageTokens = 2;

// Each attention output sums its positions' probability x value products in segments of
// this many positions from position 0, each segment's sum in order from zero, the segments'
// sums added in order: so a decode step can split a long context's positions among threads
// and still give each token the bits of a prefill.
inline constexpr int64_t kAttentionValueSegment = 64;

// The phases of one token's attention (KernelTable::token_attention).
enum class TokenPhase {
  Scores,   // scores of positions [p0, p1)
  Softmax,  // the scores of all positions become probabilities
  Values,   // outputs from the probabilities of positions [p0, p1): their segment sums
};

// Rows of staged keys hold `longest` positions rounded up to a multiple of this (any ISA's
// vector width).
inline constexpr int64_t kAttentionStageAlign = 16;

// The scratch of KernelTable::attention for `tokens` x `heads` query rows whose longest
// attends to `longest` positions: their scores, and room for the staged keys and values
// (the AMX kernel's tiles: rows rounded up to 16, positions to 32, see amx_attention.cpp).
inline int64_t attention_scratch_floats(int64_t tokens, int64_t heads, int64_t longest, int64_t head_dim) {
  const int64_t rows = (tokens * heads + 15) / 16 * 16, positions = (longest + 31) / 32 * 32;
  const int64_t staged = (rows + 2 * positions) * head_dim + 16 * positions;
  return rows * positions + (tokens >= kAttentionStageTokens ? staged : 0) + 16;
}

// The GEMV kernel handles up to this many tokens; more go to the packed GEMM.
inline constexpr int64_t kGemvMaxTokens = 4;
// GEMM blocking over k: weight panels hold [kGemmBlockK, panel_rows] f32.
inline constexpr int64_t kGemmBlockK = 256;

// A packed GEMM (the prefill regime of matmul, and the backward products), which
// cpu_gemm.cpp drives: x is packed once into token tiles of `tile_tokens`, then each weight
// panel of `panel_rows` rows is packed into a worker's buffer and multiplied by a range of
// tiles. Every sum runs in an order fixed by the blocking (never by the thread count).
struct GemmKernels {
  int64_t tile_tokens = 0;
  int64_t panel_rows = 0;
  // The scratch floats that packed x (`tiles` tiles) and one worker's panel buffer need.
  int64_t (*packed_x_floats)(int64_t tiles, int64_t k) = nullptr;
  int64_t (*panel_buffer_floats)(int64_t k) = nullptr;
  // Packs tiles [tile0, tile1) (of x, or of x stored transposed).
  void (*pack_x)(const MatmulArgs& a, int64_t tile0, int64_t tile1, float* packed) = nullptr;
  // y for weight panel `panel` and token tiles [tile0, tile1).
  void (*panel)(const MatmulArgs& a, const float* packed, int64_t panel, int64_t tile0, int64_t tile1,
                float* panel_buffer) = nullptr;
  // The most token tiles one panel call may be given (0: no limit).
  int64_t max_task_tiles = 0;
};

struct KernelTable {
  const char* isa = "";

  // --- matmul, decode regime (n <= kGemvMaxTokens): rows [m0, m1) of y, streaming w once.
  // A row's result does not depend on m0, m1 or n: each row is summed in one fixed order.
  void (*gemv)(const MatmulArgs& a, int64_t m0, int64_t m1) = nullptr;

  // --- matmul, prefill regime, f32 arithmetic: x is packed as f32
  // (packed[(tile * k + i) * tile_tokens + t] = x[tile * tile_tokens + t, i], zero past n),
  // and every weight panel is converted to f32, kGemmBlockK deep at a time.
  GemmKernels gemm;

  // --- per-row and elementwise ops (count / d elements, f32 unless stated).
  void (*convert_to_f32)(const void* src, DType dtype, int64_t count, float* dst) = nullptr;
  // dst = src rounded to dtype (F32, BF16 or F16) bit for bit as core/dtype.h's store_from_f32.
  void (*convert_from_f32)(const float* src, int64_t count, DType dtype, void* dst) = nullptr;
  void (*rms_norm)(const float* x, const float* weight, float eps, int64_t rows, int64_t d,
                   float* y) = nullptr;
  void (*layer_norm)(const float* x, const float* weight, const float* bias, float eps, int64_t rows,
                     int64_t d, float* y) = nullptr;
  void (*gelu_tanh)(const float* x, int64_t count, float* y) = nullptr;
  void (*gelu_erf)(const float* x, int64_t count, float* y) = nullptr;
  // dx = dy * gelu'(x); the output may be either input.
  void (*gelu_tanh_backward)(const float* x, const float* dy, int64_t count, float* dx) = nullptr;
  void (*gelu_erf_backward)(const float* x, const float* dy, int64_t count, float* dx) = nullptr;
  void (*silu)(const float* x, int64_t count, float* y) = nullptr;
  void (*swiglu)(const float* gate, const float* up, int64_t count, float* y) = nullptr;
  void (*geglu)(const float* gate, const float* up, int64_t count, float* y) = nullptr;
  void (*clamped_swiglu)(const float* gate, const float* up, int64_t count, float alpha, float limit,
                         float* y) = nullptr;
  void (*scale)(const float* x, float factor, int64_t count, float* y) = nullptr;
  void (*softcap)(const float* x, float cap, int64_t count, float* y) = nullptr;
  // The gradients of swiglu's (geglu's) two inputs; the outputs may be any of the inputs.
  void (*swiglu_backward)(const float* gate, const float* up, const float* dy, int64_t count, float* dgate,
                          float* dup) = nullptr;
  void (*geglu_backward)(const float* gate, const float* up, const float* dy, int64_t count, float* dgate,
                         float* dup) = nullptr;
  // dx = dy (1 - (y / cap)^2) from softcap's output y; dx may be y or dy.
  void (*softcap_backward)(const float* y, float cap, const float* dy, int64_t count, float* dx) = nullptr;
  void (*add)(const float* a, const float* b, int64_t count, float* y) = nullptr;
  void (*softmax)(const float* x, int64_t rows, int64_t d, float* y) = nullptr;
  // out[t, h, :] for the tokens t in [t0, t1) and the query heads h in [h0, h1), which must
  // share one kv head (so the cache rows are read once for all of them); `scratch` holds
  // attention_scratch_floats(t1 - t0, h1 - h0, first_pos + t1, head_dim) floats. Each output
  // is the same, bit for bit, whatever the other tokens and heads of the call, with one
  // exception: the AMX table takes a sequence of kAttentionStageTokens tokens or more (a
  // prefill) over an f16 cache, head_dim a multiple of 32 and every key and value it reads
  // finite, to the tiles, which sum in another order than a decode step (one token).
  void (*attention)(const AttentionArgs& a, int64_t t0, int64_t t1, int64_t h0, int64_t h1,
                    float* scratch) = nullptr;
  // `attention` for a's one token (a.n == 1) in phases, for a driver that splits a long
  // context's positions among threads: for the query heads [h0, h1) of one kv head, with
  // their scores at `scores` (head h0 + j at scores + j * (first_pos + 1)) and their
  // outputs at out + h * head_dim. Scores and Values take positions [p0, p1) (p0 a multiple
  // of kAttentionValueSegment; Values' p1 at most one segment on, its one segment sum
  // stored). Scores for every position, then Softmax, then Values over [0, first_pos + 1)
  // give the token the bits of `attention`; Values segment by segment into separate
  // outputs, then their sums added in order, the same. Not on the AMX tiles (one token).
  void (*token_attention)(const AttentionArgs& a, TokenPhase phase, int64_t h0, int64_t h1, int64_t p0,
                          int64_t p1, float* scores, float* out) = nullptr;
  // The tokens per attention call the driver (cpu_attention.cpp) gives a's sequence: its
  // tokens go in blocks of this many from its first. A block's rows share each cache row
  // while it is in L1, and the kv head's cache is staged once for all of them.
  int64_t (*attention_block_tokens)(const AttentionArgs& a) = nullptr;
};

const KernelTable& kernels_avx2();
const KernelTable& kernels_avx512();
// The AVX-512 table with the AMX attention (amx_attention.cpp). Call only where
// cpu_supports(CpuIsa::Amx).
const KernelTable& kernels_amx();

}  // namespace tokenmill::cpu
