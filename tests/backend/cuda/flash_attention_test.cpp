// The tiled ("flash") attention kernel's recurrence (flash_attention_math.h), run on the CPU
// exactly as flash_attention.cu runs it: tile by tile over the items, key tile by key tile,
// each score a dot product in head order then scaled, the row step, the output update with
// its keys in order. Against the float64 reference at the conformance suite's tolerances for
// head dims 16..128 (odd ones too), GQA groups 1..8, causal offsets, f32 / bf16 / f16 caches
// and several tile sizes (the kernel's among them); and bit for bit: a row's result does not
// depend on which other items share its tile, and a paged cache gives a contiguous one's bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/conformance_harness.h"
#include "backend/cuda/flash_attention.h"
#include "backend/cuda/flash_attention_math.h"
#include "backend/cuda/flash_attention_plan.h"
#include "backend/cuda/paged_addressing.h"
#include "backend/reference/reference_ops.h"

namespace tokenmill::cuda {
namespace {

using testing::close_to_reference;

constexpr double kF32 = 1e-5;
constexpr double kF16Probabilities = 1e-3;

struct Geometry {
  int64_t items_per_tile, keys_per_tile;
};
constexpr Geometry kKernelGeometry{kFlashItemsPerTile, kFlashKeysPerTile};

// One attention call's inputs: q [rows, heads, hd] f32 and caches of `dtype` with `positions`
// rows [positions, kv_heads, hd] (cache_k, cache_v: the stored values widened to f32).
struct Problem {
  int64_t heads, kv_heads, hd, positions;
  DType dtype;
  float scale;
  std::vector<float> q;
  std::vector<unsigned char> k_bytes, v_bytes;
  std::vector<float> cache_k, cache_v;

  int64_t group() const { return heads / kv_heads; }
  Tensor k_tensor() const {
    return Tensor(const_cast<unsigned char*>(k_bytes.data()), dtype, {positions, kv_heads, hd});
  }
  Tensor v_tensor() const {
    return Tensor(const_cast<unsigned char*>(v_bytes.data()), dtype, {positions, kv_heads, hd});
  }
};

Problem make_problem(int64_t rows, int64_t heads, int64_t kv_heads, int64_t hd, int64_t positions,
                     DType dtype, float q_range, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  Problem p{heads, kv_heads, hd, positions, dtype, 1.0f / std::sqrt(static_cast<float>(hd)),
            {},    {},       {}, {},        {}};
  p.q.resize(static_cast<size_t>(rows * heads * hd));
  for (float& x : p.q) x = q_range * unit(rng);
  const auto elems = static_cast<size_t>(positions * kv_heads * hd);
  for (auto [bytes, values] : {std::pair{&p.k_bytes, &p.cache_k}, std::pair{&p.v_bytes, &p.cache_v}}) {
    bytes->resize(elems * dtype_size(dtype));
    values->resize(elems);
    for (size_t i = 0; i < elems; ++i) {
      store_from_f32(bytes->data(), dtype, i, unit(rng));
      (*values)[i] = load_as_f32(bytes->data(), dtype, i);
    }
  }
  return p;
}

// flash_attention_kernel on the CPU: every (tile, kv head) of `tiles` tiles of `work`, each
// step in the kernel's order. out [out_rows, heads, hd] starts as NaN (unwritten rows stay so).
std::vector<float> emulate_flash_attention(const Problem& p, const FlashWork& work, int64_t tiles,
                                           int64_t out_rows, Geometry geo) {
  const int64_t hd = p.hd, group = p.group(), row_stride = p.kv_heads * hd;
  const bool f16 = p.dtype == DType::F16;
  const auto keys_per_tile = static_cast<int>(geo.keys_per_tile);
  std::vector<float> out(static_cast<size_t>(out_rows * p.heads * hd), NAN);
  for (int64_t kv = 0; kv < p.kv_heads; ++kv) {
    for (int64_t t = 0; t < tiles; ++t) {
      const FlashTile tile = flash_tile(work, group, geo.items_per_tile, t);
      const int32_t* table = flash_block_table(work, tile);
      const int64_t key_tiles = flash_key_tiles(flash_last_position(tile, group), geo.keys_per_tile);
      const auto cache = [&](const std::vector<float>& c, int64_t position, int64_t d) {
        return c[static_cast<size_t>(cache_row(table, work.block_shift, position) * row_stride + kv * hd +
                                     d)];
      };
      for (int64_t m = 0; m < tile.items; ++m) {
        const FlashItem item = flash_item(tile, m, group, kv);
        std::vector<float> q(static_cast<size_t>(hd));
        for (int64_t d = 0; d < hd; ++d)
          q[static_cast<size_t>(d)] =
              cache_operand(p.q[static_cast<size_t>((item.q_row * p.heads + item.head) * hd + d)], f16);
        // The scores of key tile j that the item sees (their count returned).
        std::vector<float> w(static_cast<size_t>(keys_per_tile));
        const auto scores = [&](int64_t j) {
          const int seen = flash_keys_seen(item.position, j * keys_per_tile, keys_per_tile);
          for (int k = 0; k < seen; ++k) {
            float dot = 0.0f;
            for (int64_t d = 0; d < hd; ++d)
              dot = std::fma(q[static_cast<size_t>(d)], cache(p.cache_k, j * keys_per_tile + k, d), dot);
            w[static_cast<size_t>(k)] = dot * p.scale;
          }
          return seen;
        };
        SoftmaxState state = softmax_empty();
        if (f16)
          for (int64_t j = 0; j < key_tiles; ++j) flash_softmax_step(state, w.data(), scores(j));
        std::vector<float> acc(static_cast<size_t>(hd), 0.0f);
        for (int64_t j = 0; j < key_tiles; ++j) {
          const int seen = scores(j);
          float rescale = 1.0f;
          if (f16)
            flash_f16_probabilities(w.data(), seen, state);
          else
            rescale = flash_softmax_step(state, w.data(), seen);
          for (int64_t d = 0; d < hd; ++d) {
            float& a = acc[static_cast<size_t>(d)];
            a *= rescale;
            for (int k = 0; k < seen; ++k)
              a = std::fma(w[static_cast<size_t>(k)], cache(p.cache_v, j * keys_per_tile + k, d), a);
          }
        }
        for (int64_t d = 0; d < hd; ++d)
          out[static_cast<size_t>((item.q_row * p.heads + item.head) * hd + d)] =
              flash_output(acc[static_cast<size_t>(d)], state.sum, f16);
      }
    }
  }
  return out;
}

// attention() over a contiguous cache, emulated with tiles of `geo`.
std::vector<float> emulate_contiguous(const Problem& p, int64_t rows, int64_t first_pos, Geometry geo) {
  const FlashWork work{
      .tiles = nullptr, .rows = rows, .first_pos = first_pos, .tables = nullptr, .block_shift = 0};
  return emulate_flash_attention(p, work, flash_tile_count(rows * p.group(), geo.items_per_tile), rows, geo);
}

std::string dtype_label(DType t) { return std::string(dtype_name(t)); }

struct Case {
  int64_t hd, heads, kv_heads, rows, first_pos;
};

TEST(FlashAttentionEmulation, MatchesReferenceForEveryGeometryDtypeAndGroup) {
  const Case cases[] = {
      {64, 8, 2, 70, 0},     // GQA 4, two item tiles, three key tiles
      {128, 4, 4, 37, 100},  // MHA, prefill continuation past several key tiles
      {128, 8, 1, 9, 33},    // 8 query heads per kv head
      {17, 6, 2, 21, 5},     // odd head dim, groups of 3 straddling tiles
      {80, 5, 1, 16, 64},    // group of 5, first_pos on a key-tile boundary
      {20, 2, 1, 1, 0},      // one row, one key
      {64, 4, 2, 1, 95},     // decode
      {16, 3, 3, 130, 0},    // rows beyond two item tiles
  };
  const Geometry geometries[] = {kKernelGeometry, {16, 8}, {1, 1}, {7, 5}, {64, 256}};
  uint64_t seed = 1;
  for (const DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    for (const Case& c : cases) {
      for (const float q_range : {2.0f, 12.0f}) {  // 12: scores far apart, rescales underflow
        const Problem p =
            make_problem(c.rows, c.heads, c.kv_heads, c.hd, c.first_pos + c.rows, dtype, q_range, seed++);
        const Tensor q(const_cast<float*>(p.q.data()), DType::F32, {c.rows, c.heads, c.hd});
        const std::vector<double> want =
            reference::attention(q, p.k_tensor(), p.v_tensor(), c.first_pos, p.scale);
        for (const Geometry& geo : geometries) {
          SCOPED_TRACE(dtype_label(dtype) + " hd=" + std::to_string(c.hd) +
                       " heads=" + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) +
                       " rows=" + std::to_string(c.rows) + " first_pos=" + std::to_string(c.first_pos) +
                       " q_range=" + std::to_string(q_range) + " tile=" + std::to_string(geo.items_per_tile) +
                       "x" + std::to_string(geo.keys_per_tile));
          EXPECT_TRUE(close_to_reference(emulate_contiguous(p, c.rows, c.first_pos, geo), want,
                                         dtype == DType::F16 ? kF16Probabilities : kF32));
        }
      }
    }
  }
}

TEST(FlashAttentionEmulation, ARowsBitsDoNotDependOnItsTileMates) {
  // Same key tiles, different item tiles (and so different tile-mates and last positions).
  for (const DType dtype : {DType::F32, DType::F16}) {
    const Problem p = make_problem(45, 6, 2, 24, 45 + 19, dtype, 4.0f, 99);
    const std::vector<float> whole = emulate_contiguous(p, 45, 19, {64, 8});
    for (const int64_t items : {1, 3, 7, 16}) {
      SCOPED_TRACE(dtype_label(dtype) + " items per tile " + std::to_string(items));
      EXPECT_EQ(emulate_contiguous(p, 45, 19, {items, 8}), whole);
    }
  }
}

// A continuous batch over a shuffled pool equals each sequence alone over a contiguous cache,
// bit for bit, through the kernel's tiles (flash_tiles_of_sequences) and cache_row.
TEST(FlashAttentionEmulation, PagedEqualsContiguousBitForBit) {
  struct Shape {
    int64_t rows, first_pos;
  };
  const Shape shapes[] = {{40, 0}, {1, 37}, {0, 5}, {70, 13}, {16, 16}};
  const int64_t heads = 6, kv_heads = 2, hd = 20, block_size = 4, group = heads / kv_heads;
  for (const DType dtype : {DType::F32, DType::F16}) {
    SCOPED_TRACE(dtype_label(dtype));
    // Each sequence's q rows and cache; then all of them in one pool, blocks shuffled.
    std::vector<Problem> alone;
    int64_t q_rows = 0, blocks = 0;
    for (const Shape& s : shapes) {
      alone.push_back(make_problem(s.rows, heads, kv_heads, hd, s.first_pos + s.rows, dtype, 3.0f,
                                   static_cast<uint64_t>(1000 + q_rows)));
      q_rows += s.rows + 1;  // a row no sequence owns before the next
      blocks += (s.first_pos + s.rows + block_size - 1) / block_size;
    }
    std::vector<int32_t> order(static_cast<size_t>(blocks));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937_64(5));
    Problem pool = make_problem(q_rows, heads, kv_heads, hd, blocks * block_size, dtype, 1.0f, 1);
    std::vector<std::vector<int32_t>> tables(std::size(shapes));
    std::vector<Backend::PagedSequence> sequences;
    int64_t row = 0;
    size_t next_block = 0;
    for (size_t s = 0; s < std::size(shapes); ++s) {
      row += 1;
      const Problem& a = alone[s];
      std::copy(a.q.begin(), a.q.end(), pool.q.begin() + row * heads * hd);
      for (int64_t p = 0; p < a.positions; p += block_size) tables[s].push_back(order[next_block++]);
      const int64_t slot_elems = kv_heads * hd;
      for (int64_t p = 0; p < a.positions; ++p)
        for (int64_t e = 0; e < slot_elems; ++e) {
          const int64_t to = cache_row(tables[s].data(), 2, p) * slot_elems + e;
          pool.cache_k[static_cast<size_t>(to)] = a.cache_k[static_cast<size_t>(p * slot_elems + e)];
          pool.cache_v[static_cast<size_t>(to)] = a.cache_v[static_cast<size_t>(p * slot_elems + e)];
        }
      sequences.push_back(
          {.first_row = row, .rows = shapes[s].rows, .first_pos = shapes[s].first_pos, .blocks = tables[s]});
      row += shapes[s].rows;
    }
    PagedLayout layout;
    std::vector<FlashTile> tiles;
    flash_tiles_of_sequences(sequences, block_size, group, layout, tiles);
    const FlashWork work{.tiles = tiles.data(),
                         .rows = 0,
                         .first_pos = 0,
                         .tables = layout.tables.data(),
                         .block_shift = layout.block_shift};
    const std::vector<float> got =
        emulate_flash_attention(pool, work, static_cast<int64_t>(tiles.size()), q_rows, kKernelGeometry);
    for (size_t s = 0; s < std::size(shapes); ++s) {
      const auto first = static_cast<size_t>(sequences[s].first_row * heads * hd);
      const std::vector<float> rows(got.begin() + first, got.begin() + first + alone[s].q.size());
      EXPECT_EQ(rows, emulate_contiguous(alone[s], shapes[s].rows, shapes[s].first_pos, kKernelGeometry))
          << "sequence " << s;
    }
    // The rows before each sequence belong to none: never written.
    for (const Backend::PagedSequence& seq : sequences)
      EXPECT_TRUE(std::isnan(got[static_cast<size_t>((seq.first_row - 1) * heads * hd)]));
  }
}

}  // namespace
}  // namespace tokenmill::cuda
