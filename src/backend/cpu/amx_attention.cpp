// The AMX attention: KernelTable::attention of kernels_amx(). The tokens of a sequence of
// kAttentionStageTokens tokens or more (a prefill) over an f16 cache, head_dim a multiple of
// 32, run on the AMX tiles; every other call runs the AVX-512 kernel, and so does a call
// whose keys or values hold an inf or NaN (the tiles would multiply them by the zero low
// parts and zero probabilities: NaN where the AVX-512 kernel gives inf, or reads nothing).
// This file is compiled with AVX-512, AVX512-BF16 and AMX enabled; it runs only where
// cpu_supports(CpuIsa::Amx).
//
// The arithmetic is Backend::attention's for an f16 cache: q rounded to f16, each score
// scale * (q . k) summed in f32 from exact f16 x f16 products, softmax, the probabilities
// rounded to f16, each output sum_p prob_p v_p summed in f32 from exact f16 x f16 products.
// AMX multiplies bf16 by bf16 exactly and sums in f32. An f16 value x (11 significant bits)
// is exactly hi + lo, hi = x with its low 16 bits cleared (8 bits) and lo = x - hi (at most
// 3 bits), both bf16; so a . b = hi.hi + hi.lo + lo.hi + lo.lo, four tile products of exact
// products. Each sum runs over 32 terms per tile product, its depth (dims for a score,
// positions for an output) ascending by steps of 32 and the four parts in that order within
// a step. That order is fixed per output whatever the other rows, tokens and heads of the
// call, but it is not the AVX-512 kernel's: a decode step (one token) and the same token in
// a prefill differ in the last bits. (AMX treats bf16 subnormals as zero; every part and
// product here is a multiple of 2^-48, far above them.) The softmax between the two
// products is softmax_row's arithmetic on the scaled scores.
//
// Staged operands, bf16 tiles of 16 rows x 32 values (1 KiB), hi then lo:
//   query tiles per 16 query rows and 32 dims: rows x dims (zero rows past the item's)
//   key tiles per 16 positions and 32 dims: AMX's pair layout, row i holding dims 2i and
//     2i + 1 of each of the 16 positions
//   probability tiles per 16 rows and 32 positions: rows x positions (zero past each row's
//     length)
//   value tiles per 32 positions and 16 dims: row i holding positions 2i and 2i + 1 of each
//     of the 16 dims
// Keys and values past the longest row's length are staged as zeros (never read).
#include <immintrin.h>

#include <bit>
#include <cfloat>
#include <cstdint>

#include "backend/cpu/amx_tiles.h"
#include "backend/cpu/simd_avx512.h"
// After the wrapper, as kernel_table_impl.h includes it.
#include "backend/cpu/attention_impl.h"

namespace tokenmill::cpu {
namespace {

constexpr int64_t kTile = 16;                   // rows, positions or dims of a tile
constexpr int64_t kStep = 32;                   // bf16 values in a tile row: one product's depth
constexpr int64_t kTileValues = kTile * kStep;  // bf16 values in a tile
constexpr int64_t kCTiles = 4;                  // tiles 0-3 hold sums, 4-5 the A parts, 6-7 B's
// Tokens per call of a sequence the tiles take (KernelTable::attention_block_tokens): each
// call stages its kv head's keys and values, so the blocks are longer than the AVX-512
// kernel's.
constexpr int64_t kBlockTokens = 64;

// Whether the tiles take a's sequence.
bool tiles_take(const AttentionArgs& a) {
  return a.window == 0 && a.softcap == 0.0f && a.sinks == nullptr && a.cache_dtype == DType::F16 &&
         a.n >= kAttentionStageTokens && a.head_dim % kStep == 0;
}

int64_t round_up(int64_t x, int64_t multiple) { return (x + multiple - 1) / multiple * multiple; }

// x = hi + lo exactly for f16 values x, as f32 lanes whose low 16 bits are zero (so their
// upper halves are the bf16 values). Where x is not finite lo is 0 (hi keeps the inf or
// NaN), and its lane is off in the mask returned.
__mmask16 split(__m512 x, __m512& hi, __m512& lo) {
  hi = _mm512_castsi512_ps(
      _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
  const __mmask16 finite = _mm512_cmp_ps_mask(_mm512_abs_ps(x), _mm512_set1_ps(FLT_MAX), _CMP_LE_OQ);
  lo = _mm512_maskz_sub_ps(finite, x, hi);
  return finite;
}

// 32 such values, a's 16 then b's, as bf16 (the conversion is exact).
__m512 packed(__m512 a, __m512 b) { return std::bit_cast<__m512>(_mm512_cvtne2ps_pbh(b, a)); }

// The pair layout of two such vectors: lane i holds a[i] in its low half and b[i] in its high.
__m512i paired(__m512 a, __m512 b) {
  return _mm512_or_si512(
      _mm512_srli_epi32(_mm512_castps_si512(a), 16),
      _mm512_and_si512(_mm512_castps_si512(b), _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
}

// Stores hi and lo parts of 32 values at `hi` and one tile further.
void store_parts(uint16_t* hi, __m512 a, __m512 b) {
  __m512 a_hi, a_lo, b_hi, b_lo;
  split(a, a_hi, a_lo);
  split(b, b_hi, b_lo);
  _mm512_storeu_ps(hi, packed(a_hi, b_hi));
  _mm512_storeu_ps(hi + kTileValues, packed(a_lo, b_lo));
}

// Query tiles: tile (t, s) at out + (t * steps + s) * 2 tiles.
void stage_query_tiles(const QueryRows& rows, int64_t steps, uint16_t* out) {
  for (int64_t r = 0; r < round_up(rows.count, kTile); ++r) {
    const float* q = rows.q(r < rows.count ? r : 0);
    const __mmask16 live = r < rows.count ? static_cast<__mmask16>(0xffff) : 0;
    for (int64_t s = 0; s < steps; ++s)
      store_parts(out + ((r / kTile * steps + s) * 2) * kTileValues + r % kTile * kStep,
                  _mm512_maskz_loadu_ps(live, q + s * kStep),
                  _mm512_maskz_loadu_ps(live, q + s * kStep + 16));
  }
}

// Key tiles of positions [0, positions) (a multiple of 16): tile (b, s) at out + (b * steps
// + s) * 2 tiles. Returns whether every key read is finite.
template <class Rows>
bool stage_key_tiles(const Rows& keys, int64_t longest, int64_t positions, int64_t steps, uint16_t* out) {
  __mmask16 finite = 0xffff;
  for (int64_t b = 0; b < positions / kTile; ++b) {
    for (int64_t s = 0; s < steps; ++s) {
      __m512 hi[kTile], lo[kTile];  // [position]: its 16 dim pairs, as 32-bit lanes
      for (int64_t j = 0; j < kTile; ++j) {
        const int64_t p = b * kTile + j;
        if (p >= longest) {
          hi[j] = lo[j] = _mm512_setzero_ps();
          continue;
        }
        const uint16_t* k = keys.row(p) + s * kStep;
        __m512 a_hi, a_lo, b_hi, b_lo;
        finite &= split(Avx512::load_f16(k), a_hi, a_lo);
        finite &= split(Avx512::load_f16(k + 16), b_hi, b_lo);
        hi[j] = packed(a_hi, b_hi);
        lo[j] = packed(a_lo, b_lo);
      }
      Avx512::transpose(hi);  // [dim pair]: its 16 positions
      Avx512::transpose(lo);
      uint16_t* tile = out + ((b * steps + s) * 2) * kTileValues;
      for (int64_t i = 0; i < kTile; ++i) {
        _mm512_storeu_ps(tile + i * kStep, hi[i]);
        _mm512_storeu_ps(tile + kTileValues + i * kStep, lo[i]);
      }
    }
  }
  return finite == 0xffff;
}

// Value tiles of positions [0, positions) (a multiple of 32): tile (s, g) at out + (s *
// groups + g) * 2 tiles. Returns whether every value read is finite.
template <class Rows>
bool stage_value_tiles(const Rows& values, int64_t longest, int64_t positions, int64_t groups,
                       uint16_t* out) {
  __mmask16 finite = 0xffff;
  for (int64_t p = 0; p < positions; p += 2) {
    for (int64_t g = 0; g < groups; ++g) {
      __m512 even_hi, even_lo, odd_hi, odd_lo;
      finite &= split(p < longest ? Avx512::load_f16(values.row(p) + g * kTile) : _mm512_setzero_ps(),
                      even_hi, even_lo);
      finite &= split(p + 1 < longest ? Avx512::load_f16(values.row(p + 1) + g * kTile) : _mm512_setzero_ps(),
                      odd_hi, odd_lo);
      uint16_t* row = out + ((p / kStep * groups + g) * 2) * kTileValues + p % kStep / 2 * kStep;
      _mm512_storeu_si512(row, paired(even_hi, odd_hi));
      _mm512_storeu_si512(row + kTileValues, paired(even_lo, odd_lo));
    }
  }
  return finite == 0xffff;
}

// Row scores x[0, len) (unscaled q . k) become e_p = exp(scale x_p - m), m the largest
// scaled score, as softmax_row computes them from the scaled scores (the product rounded,
// then the difference); returns 1 / sum_p e_p, summed as softmax_row sums. Lanes past len
// are neither read nor written.
float exponentials(float* x, int64_t len, float scale) {
  const __m512 scale_v = _mm512_set1_ps(scale);
  __m512 largest = _mm512_set1_ps(-__builtin_inff());
  for (int64_t p = 0; p < len; p += kTile) {
    const __mmask16 lanes = first16(len - p);
    largest = _mm512_mask_max_ps(largest, lanes, largest,
                                 _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, x + p), scale_v));
  }
  const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(largest));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t p = 0; p < len; p += kTile) {
    const __mmask16 lanes = first16(len - p);
    const __m512 scaled = _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, x + p), scale_v);
    const __m512 e = _mm512_maskz_mov_ps(lanes, exp<Avx512>(_mm512_sub_ps(scaled, m)));
    _mm512_mask_storeu_ps(x + p, lanes, e);
    sum = _mm512_add_ps(sum, e);
  }
  return 1.0f / Avx512::reduce_add(sum);
}

// Probability tiles of rows [r0, r0 + 16) for positions [0, steps * 32): tile s at out + s *
// 2 tiles. Row r's probabilities are its exponentials times inverse[r - r0], rounded to f16.
void stage_probability_tiles(const QueryRows& rows, int64_t r0, const float (&inverse)[kTile], int64_t steps,
                             uint16_t* out) {
  for (int64_t r = 0; r < kTile; ++r) {
    const int64_t len = r0 + r < rows.count ? rows.len(r0 + r) : 0;
    const float* x = rows.scores_of(r0 + r < rows.count ? r0 + r : 0);
    const __m512 inv = _mm512_set1_ps(inverse[r]);
    const auto probabilities = [&](int64_t p) {
      return Avx512::round_f16(_mm512_mul_ps(_mm512_maskz_loadu_ps(first16(len - p), x + p), inv));
    };
    for (int64_t s = 0; s < steps; ++s)
      store_parts(out + s * 2 * kTileValues + r * kStep, probabilities(s * kStep),
                  probabilities(s * kStep + 16));
  }
}

// GCC 12's AMX intrinsics paste their tile numbers into the asm text, so these take a
// literal J: sum tile J (when J < N) zeroed; += A . B for the four parts, A's hi and lo in
// tiles 4 and 5, B's at b(J, s); stored at c(J).
#define TOKENMILL_ZERO_TILE(J) \
  if constexpr (J < N) _tile_zero(J)
#define TOKENMILL_MULTIPLY_PARTS(J)          \
  if constexpr (J < N) {                     \
    const uint16_t* parts = b(J, s);         \
    _tile_loadd(6, parts, 64);               \
    _tile_loadd(7, parts + kTileValues, 64); \
    _tile_dpbf16ps(J, 4, 6);                 \
    _tile_dpbf16ps(J, 4, 7);                 \
    _tile_dpbf16ps(J, 5, 6);                 \
    _tile_dpbf16ps(J, 5, 7);                 \
  }
#define TOKENMILL_STORE_TILE(J) \
  if constexpr (J < N) _tile_stored(J, c(J), stride_bytes)

// Sum tiles 0..N-1 = sum over `steps` steps s of the A tiles at a + s * 2 tiles times the B
// tiles at b(J, s), stored (16 x 16 f32 each) at c(J) with rows `stride` floats apart.
template <int N, class BTile, class CTile>
void multiply(const uint16_t* a, int64_t steps, BTile b, CTile c, int64_t stride) {
  static_assert(N >= 1 && N <= kCTiles);
  const int64_t stride_bytes = stride * static_cast<int64_t>(sizeof(float));
  TOKENMILL_ZERO_TILE(0);
  TOKENMILL_ZERO_TILE(1);
  TOKENMILL_ZERO_TILE(2);
  TOKENMILL_ZERO_TILE(3);
  for (int64_t s = 0; s < steps; ++s) {
    _tile_loadd(4, a + s * 2 * kTileValues, 64);
    _tile_loadd(5, a + (s * 2 + 1) * kTileValues, 64);
    TOKENMILL_MULTIPLY_PARTS(0)
    TOKENMILL_MULTIPLY_PARTS(1)
    TOKENMILL_MULTIPLY_PARTS(2)
    TOKENMILL_MULTIPLY_PARTS(3)
  }
  TOKENMILL_STORE_TILE(0);
  TOKENMILL_STORE_TILE(1);
  TOKENMILL_STORE_TILE(2);
  TOKENMILL_STORE_TILE(3);
}

#undef TOKENMILL_ZERO_TILE
#undef TOKENMILL_MULTIPLY_PARTS
#undef TOKENMILL_STORE_TILE

// multiply<n> for n in [1, kCTiles].
template <class BTile, class CTile>
void multiply_n(int64_t n, const uint16_t* a, int64_t steps, BTile b, CTile c, int64_t stride) {
  switch (n) {
    case 1: multiply<1>(a, steps, b, c, stride); break;
    case 2: multiply<2>(a, steps, b, c, stride); break;
    case 3: multiply<3>(a, steps, b, c, stride); break;
    default: multiply<kCTiles>(a, steps, b, c, stride); break;
  }
}

// Every row of `rows` (scores `rows.stride` >= 32-rounded longest length apart, room for
// 16-rounded rows) on the tiles; `staged` holds the staged operands. Returns false, having
// written no output, where a key or value read is not finite.
template <class Rows>
bool attention_tiles(const QueryRows& rows, const Rows& keys, const Rows& values, float* staged) {
  const int64_t hd = rows.a->head_dim, steps = hd / kStep, groups = hd / kTile;
  const int64_t longest = rows.len(rows.count - 1), positions = round_up(longest, kStep);
  auto* query_tiles = reinterpret_cast<uint16_t*>(staged);
  uint16_t* key_tiles = query_tiles + round_up(rows.count, kTile) * hd * 2;
  uint16_t* value_tiles = key_tiles + positions * hd * 2;
  uint16_t* probability_tiles = value_tiles + positions * hd * 2;
  if (!stage_key_tiles(keys, longest, round_up(longest, kTile), steps, key_tiles) ||
      !stage_value_tiles(values, longest, positions, groups, value_tiles))
    return false;
  stage_query_tiles(rows, steps, query_tiles);
  const TileConfig config;
  _tile_loadconfig(&config);
  alignas(64) float sums[kCTiles][kTile][kTile];
  for (int64_t r0 = 0; r0 < rows.count; r0 += kTile) {
    const int64_t r1 = r0 + kTile < rows.count ? r0 + kTile : rows.count;
    const int64_t len = rows.len(r1 - 1);  // the longest of these rows
    // GCC 12's _tile_loadd declares no memory operand: this barrier keeps the stores that
    // staged the operands (and the probabilities, below) before the loads that read them.
    asm volatile("" ::: "memory");
    const uint16_t* queries = query_tiles + r0 / kTile * steps * 2 * kTileValues;
    float* scores = rows.scores_of(r0);
    for (int64_t b0 = 0; b0 < round_up(len, kTile) / kTile; b0 += kCTiles)
      multiply_n(
          round_up(len, kTile) / kTile - b0, queries, steps,
          [&](int j, int64_t s) { return key_tiles + ((b0 + j) * steps + s) * 2 * kTileValues; },
          [&](int j) { return scores + (b0 + j) * kTile; }, rows.stride);
    float inverse[kTile] = {};
    for (int64_t r = r0; r < r1; ++r)
      inverse[r - r0] = exponentials(rows.scores_of(r), rows.len(r), rows.a->scale);
    const int64_t value_steps = round_up(len, kStep) / kStep;
    stage_probability_tiles(rows, r0, inverse, value_steps, probability_tiles);
    asm volatile("" ::: "memory");
    for (int64_t g0 = 0; g0 < groups; g0 += kCTiles) {
      multiply_n(
          groups - g0, probability_tiles, value_steps,
          [&](int j, int64_t s) { return value_tiles + (s * groups + g0 + j) * 2 * kTileValues; },
          [&](int j) { return &sums[j][0][0]; }, kTile);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t j = 0; j < kCTiles && g0 + j < groups; ++j)
          _mm512_storeu_ps(rows.out(r) + (g0 + j) * kTile, _mm512_load_ps(sums[j][r - r0]));
    }
  }
  _tile_release();
  return true;
}

int64_t amx_attention_block_tokens(const AttentionArgs& a) {
  return tiles_take(a) ? kBlockTokens : attention_block_tokens(a);
}

void attention_amx(const AttentionArgs& a, int64_t t0, int64_t t1, int64_t h0, int64_t h1, float* scratch) {
  if (!tiles_take(a)) {
    kernels_avx512().attention(a, t0, t1, h0, h1, scratch);
    return;
  }
  // The layout attention_scratch_floats provides for: scores of 16-rounded rows by
  // 32-rounded positions, then the staged tiles.
  const int64_t count = (t1 - t0) * (h1 - h0), positions = round_up(a.first_pos + t1, kStep);
  const QueryRows rows{&a, t0, h0, h1 - h0, count, positions, scratch};
  float* staged = scratch + round_up(count, kTile) * positions;
  bool done = false;
  with_cache_rows<DType::F16>(a, h0, [&](const auto& keys, const auto& values) {
    done = attention_tiles(rows, keys, values, staged);
  });
  if (!done) kernels_avx512().attention(a, t0, t1, h0, h1, scratch);
}

}  // namespace

const KernelTable& kernels_amx() {
  static const KernelTable table = [] {
    KernelTable t = kernels_avx512();
    t.isa = "amx";
    t.attention = &attention_amx;
    t.attention_block_tokens = &amx_attention_block_tokens;
    return t;
  }();
  return table;
}

}  // namespace tokenmill::cpu
