// The AMX GEMM's kernels (amx_gemm.h). This file is compiled with AVX-512, AVX512-BF16 and
// AMX enabled; cpu_backend.cpp calls into it only when cpu_supports(CpuIsa::Amx).
//
// Blocking. k runs in steps of 32 (one 64-byte row of bf16 in a tile). A token tile is 32
// tokens: per step, four A tiles of 16 tokens x 32 k, [token half][hi, lo]. A panel is 128
// weight rows: per step, eight B tiles of 16 k-pairs x 16 rows (AMX's pair-interleaved
// layout: B[p][r] holds w[r, 2p] and w[r, 2p + 1]). The tile registers hold, for 32 tokens
// by 32 rows of the panel at a time: 0-3 the f32 sums C[token half][row half], 4-5 the two A
// tiles, 6-7 the two B tiles. Per step that is 8 tile products, hi then lo, so each output
// is summed in the same order (k ascending, hi before lo) whatever the tasks and threads.
// k is taken kBlockSteps steps at a time: the panel's B tiles of one block (256 KiB) and a
// token tile's A tiles of it (128 KiB) stay in L2. Between blocks the sums wait in the
// panel buffer, stored and reloaded exactly, so blocking changes no bit of the result.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cstdint>

#include "backend/cpu/amx_gemm.h"
#include "backend/cpu/amx_tiles.h"
#include "backend/cpu/simd_avx512.h"

namespace tokenmill::cpu {
namespace {

constexpr int64_t kTileTokens = 32;
constexpr int64_t kPanelRows = 128;
constexpr int64_t kStep = 32;                 // k per step
constexpr int64_t kTileValues = 16 * 32;      // bf16 values in one 1 KiB tile
constexpr int64_t kATiles = 4;                // per token tile and step
constexpr int64_t kBTiles = kPanelRows / 16;  // per panel and step
constexpr int64_t kBlockSteps = 32;           // k per block: 1024
constexpr int64_t kMaxTaskTiles = 16;         // token tiles per panel call
constexpr int64_t kPairs = kPanelRows / 32;   // of row groups, per panel
constexpr int64_t kSumFloats = 4 * 16 * 16;   // the four C tiles of one token tile and pair

int64_t steps(int64_t k) { return (k + kStep - 1) / kStep; }

int64_t packed_x_floats(int64_t tiles, int64_t k) { return tiles * steps(k) * kATiles * kTileValues / 2; }

// One block's B tiles, then (when k has several blocks) the sums of every token tile and
// pair of a call.
int64_t panel_buffer_floats(int64_t k) {
  const int64_t block_steps = std::min(steps(k), kBlockSteps);
  const int64_t sums = steps(k) > kBlockSteps ? kMaxTaskTiles * kPairs * kSumFloats : 0;
  return block_steps * kBTiles * kTileValues / 2 + sums;
}

__mmask32 first32(int64_t count) { return count >= 32 ? 0xffffffffu : count <= 0 ? 0 : (1u << count) - 1; }

__m256i to_bf16(__m512 v) { return std::bit_cast<__m256i>(_mm512_cvtneps_pbh(v)); }

__m512 from_bf16(__m256i v) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16)); }

// x = hi + lo for 16 lanes, stored as bf16 at hi and lo. Where hi is not finite (x infinite
// or NaN, or |x| within half a bf16 step of FLT_MAX, which rounds to inf), lo is 0: the
// product is then hi's (inf or NaN), never inf - inf.
void split(__m512 x, uint16_t* hi, uint16_t* lo) {
  const __m256i h = to_bf16(x);
  const __m512 hf = from_bf16(h);
  const __mmask16 finite = _mm512_cmp_ps_mask(_mm512_abs_ps(hf), _mm512_set1_ps(FLT_MAX), _CMP_LE_OQ);
  const __m512 rest = _mm512_maskz_sub_ps(finite, x, hf);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi), h);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo), to_bf16(rest));
}

void pack_x(const MatmulArgs& a, int64_t tile0, int64_t tile1, float* packed) {
  const int64_t n_steps = steps(a.k);
  auto* out = reinterpret_cast<uint16_t*>(packed);
  for (int64_t b = tile0; b < tile1; ++b) {
    for (int64_t s = 0; s < n_steps; ++s) {
      uint16_t* tiles = out + (b * n_steps + s) * kATiles * kTileValues;
      const int64_t k0 = s * kStep;
      for (int64_t t = 0; t < kTileTokens; ++t) {
        const int64_t token = b * kTileTokens + t;
        const int64_t count = token < a.n ? std::min(kStep, a.k - k0) : 0;  // zeros past n
        // Masked-off lanes read nothing; the pointers stay inside x all the same.
        const float* src = count > 0 ? a.x + token * a.k + k0 : a.x;
        const float* src_high = count > 16 ? src + 16 : src;
        uint16_t* hi = tiles + (t / 16) * 2 * kTileValues + (t % 16) * kStep;
        uint16_t* lo = hi + kTileValues;
        split(_mm512_maskz_loadu_ps(first16(count), src), hi, lo);
        split(_mm512_maskz_loadu_ps(first16(count - 16), src_high), hi + 16, lo + 16);
      }
    }
  }
}

// The B tiles of panel `panel` for steps [s0, s0 + count) (rows past m and k past its end
// are zero): for each step and group of 16 rows, the 16 rows' 32-bit k-pairs, transposed.
void pack_panel(const MatmulArgs& a, int64_t panel, int64_t s0, int64_t count, uint16_t* out) {
  const auto* w = static_cast<const uint16_t*>(a.w);
  for (int64_t s = s0; s < s0 + count; ++s) {
    const int64_t k0 = s * kStep;
    const __mmask32 columns = first32(a.k - k0);
    for (int64_t g = 0; g < kBTiles; ++g) {
      __m512 rows[16];
      for (int64_t j = 0; j < 16; ++j) {
        const int64_t r = panel * kPanelRows + g * 16 + j;
        rows[j] = r < a.m ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(columns, w + r * a.k + k0))
                          : _mm512_setzero_ps();
      }
      Avx512::transpose(rows);  // 32-bit lanes: rows[p][j] = pair p of row j
      uint16_t* tile = out + ((s - s0) * kBTiles + g) * kTileValues;
      for (int64_t p = 0; p < 16; ++p) _mm512_storeu_ps(reinterpret_cast<float*>(tile + p * 32), rows[p]);
    }
  }
}

// y for tokens of tile `tile` and rows r0.. of the panel from the four f32 sums (c[token
// half][row half]): the sum, plus the bias if any, or plus y when accumulating.
void write_y(const MatmulArgs& a, const float (&c)[2][2][16][16], int64_t tile, int64_t r0) {
  for (int64_t half = 0; half < 2; ++half) {
    const int64_t rows0 = r0 + half * 16;
    const __mmask16 rows = first16(a.m - rows0);
    if (rows == 0) continue;
    const __m512 bias = a.bias != nullptr ? _mm512_maskz_loadu_ps(rows, a.bias + rows0) : _mm512_setzero_ps();
    for (int64_t t = 0; t < kTileTokens; ++t) {
      const int64_t token = tile * kTileTokens + t;
      if (token >= a.n) break;
      float* y = a.y + token * a.m + rows0;
      const __m512 sum = _mm512_loadu_ps(c[t / 16][half][t % 16]);
      const __m512 out = a.accumulate        ? _mm512_add_ps(sum, _mm512_maskz_loadu_ps(rows, y))
                         : a.bias != nullptr ? _mm512_add_ps(sum, bias)
                                             : sum;  // as sums_to_y stores it (-0 stays -0)
      _mm512_mask_storeu_ps(y, rows, out);
    }
  }
}

// Whether the sums of token tile `tile` and rows r0.. go from the tiles straight into y
// (sums_to_y): all 32 x 32 inside y, nothing to add (no bias, not accumulating). Each of a
// prefill's 32 x 32 blocks of y otherwise passes through a buffer: storing the tiles
// straight into y took 6-8% off the GEMM (BM_Matmul, n = 512).
bool sums_go_to_y(const MatmulArgs& a, int64_t tile, int64_t r0) {
  return a.bias == nullptr && !a.accumulate && (tile + 1) * kTileTokens <= a.n && r0 + 32 <= a.m;
}

// Tiles 0-3 (C tile t: token half t / 2, row half t % 2) into y's 32 x 32 block at token tile
// `tile`, rows r0..
void sums_to_y(const MatmulArgs& a, int64_t tile, int64_t r0) {
  float* y = a.y + tile * kTileTokens * a.m + r0;
  const int64_t stride = a.m * static_cast<int64_t>(sizeof(float));
  _tile_stored(0, y, stride);
  _tile_stored(1, y + 16, stride);
  _tile_stored(2, y + 16 * a.m, stride);
  _tile_stored(3, y + 16 * a.m + 16, stride);
}

// Adds the tile products of `count` steps to the sums in tiles 0-3: x and w point at the first
// step's A tiles (of one token tile) and B tiles (of one pair of row groups).
void multiply_steps(const uint16_t* x, const uint16_t* w, int64_t count) {
  for (int64_t s = 0; s < count; ++s, x += kATiles * kTileValues, w += kBTiles * kTileValues) {
    _tile_loadd(6, w, 64);
    _tile_loadd(7, w + kTileValues, 64);
    _tile_loadd(4, x, 64);                    // hi, tokens 0-15
    _tile_loadd(5, x + 2 * kTileValues, 64);  // hi, tokens 16-31
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
    _tile_loadd(4, x + kTileValues, 64);      // lo, tokens 0-15
    _tile_loadd(5, x + 3 * kTileValues, 64);  // lo, tokens 16-31
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
}

void panel(const MatmulArgs& a, const float* packed, int64_t panel, int64_t tile0, int64_t tile1,
           float* panel_buffer) {
  auto* b_tiles = reinterpret_cast<uint16_t*>(panel_buffer);
  const auto* x_tiles = reinterpret_cast<const uint16_t*>(packed);
  const int64_t n_steps = steps(a.k);
  float* sums = panel_buffer + std::min(n_steps, kBlockSteps) * kBTiles * kTileValues / 2;
  const int64_t rows = std::min(kPanelRows, a.m - panel * kPanelRows);
  const TileConfig config;
  _tile_loadconfig(&config);
  alignas(64) float c[2][2][16][16];  // [token half][row half]
  for (int64_t s0 = 0; s0 < n_steps; s0 += kBlockSteps) {
    const int64_t count = std::min(kBlockSteps, n_steps - s0);
    const bool first = s0 == 0, last = s0 + count == n_steps;
    pack_panel(a, panel, s0, count, b_tiles);
    // GCC 12's _tile_loadd declares no memory operand: without this barrier the stores that
    // packed the B tiles could be moved past the tile loads that read them. (_tile_stored
    // has a memory clobber, so the previous block's loads stay before this block's packing.)
    asm volatile("" ::: "memory");
    for (int64_t b = tile0; b < tile1; ++b) {
      for (int64_t pair = 0; pair * 32 < rows; ++pair) {
        // [C tile][16][16]; the buffer has sums only when k has several blocks
        float* sum = first && last ? nullptr : sums + ((b - tile0) * kPairs + pair) * kSumFloats;
        if (first) {
          _tile_zero(0);
          _tile_zero(1);
          _tile_zero(2);
          _tile_zero(3);
        } else {
          _tile_loadd(0, sum, 64);
          _tile_loadd(1, sum + 256, 64);
          _tile_loadd(2, sum + 512, 64);
          _tile_loadd(3, sum + 768, 64);
        }
        multiply_steps(x_tiles + (b * n_steps + s0) * kATiles * kTileValues, b_tiles + pair * 2 * kTileValues,
                       count);
        const int64_t r0 = panel * kPanelRows + pair * 32;
        if (last && sums_go_to_y(a, b, r0)) {
          sums_to_y(a, b, r0);
          continue;
        }
        float* to = last ? &c[0][0][0][0] : sum;  // C tile t = (token half t / 2, row half t % 2)
        _tile_stored(0, to, 64);
        _tile_stored(1, to + 256, 64);
        _tile_stored(2, to + 512, 64);
        _tile_stored(3, to + 768, 64);
        if (last) write_y(a, c, b, r0);
      }
    }
  }
  _tile_release();
}

}  // namespace

const GemmKernels& amx_gemm_kernels() {
  static const GemmKernels kernels{.tile_tokens = kTileTokens,
                                   .panel_rows = kPanelRows,
                                   .packed_x_floats = &packed_x_floats,
                                   .panel_buffer_floats = &panel_buffer_floats,
                                   .pack_x = &pack_x,
                                   .panel = &panel,
                                   .max_task_tiles = kMaxTaskTiles};
  return kernels;
}

}  // namespace tokenmill::cpu
