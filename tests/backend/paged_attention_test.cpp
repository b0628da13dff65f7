// Paged KV cache ops of every available backend (Backend::paged_attention, store_kv):
// against the float64 reference, bit for bit against attention() over a contiguous cache
// holding the same rows, independent of the batch and the thread count, and their errors.
//
// A test batch gives its sequences query rows in order with one row no sequence owns
// before each (it must stay untouched), hands out the pool's blocks in a shuffled order
// (block tables are not contiguous), and fills every pool row no sequence may read with
// NaN (reading one would poison the output). Tolerances as in conformance_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "backend/reference/reference_ops.h"
#include "conformance_harness.h"
#include "core/error.h"
#include "core/parallel.h"

namespace tokenmill::testing {
namespace {

constexpr double kF32 = 1e-5;
constexpr double kF16Probabilities = 1e-3;
constexpr float kUnowned = 7.25f;  // what out holds in rows no sequence owns

struct SequenceShape {
  int64_t rows, first_pos;
};

struct Heads {
  int64_t head_dim, heads, kv_heads;
};

std::string label(DType dtype, const Heads& h, int64_t block_size) {
  return std::string(dtype_name(dtype)) + " head_dim=" + std::to_string(h.head_dim) +
         " heads=" + std::to_string(h.heads) + "/" + std::to_string(h.kv_heads) +
         " block_size=" + std::to_string(block_size);
}

// One call's inputs: q, the pools, out and the sequences with their block tables.
struct Batch {
  Heads h;
  std::unique_ptr<GuardedBuffer> q, k_pool, v_pool, out;
  std::vector<std::vector<int32_t>> tables;
  std::vector<Backend::PagedSequence> sequences;
  std::vector<bool> owned;  // per query row

  int64_t window = 0;                    // AttentionScores's
  float softcap = 0.0f;                  // AttentionScores's
  std::unique_ptr<GuardedBuffer> sinks;  // AttentionScores's, when set

  int64_t row_elems() const { return h.heads * h.head_dim; }
  AttentionScores scores() const {
    AttentionScores s(1.0f / std::sqrt(static_cast<float>(h.head_dim)), window, softcap);
    if (sinks != nullptr) s.sinks = &sinks->tensor();
    return s;
  }
  // Rows [first_row, first_row + rows) of values shaped like q.
  std::vector<float> rows_of(const std::vector<float>& values, const Backend::PagedSequence& s) const {
    return {values.begin() + s.first_row * row_elems(),
            values.begin() + (s.first_row + s.rows) * row_elems()};
  }
};

// The bytes of pool slot `slot` (one position, every kv head).
const unsigned char* slot_bytes(const GuardedBuffer& pool, int64_t slot) {
  const Tensor& t = pool.tensor();
  return static_cast<const unsigned char*>(t.data) +
         static_cast<size_t>(slot * t.dim(2) * t.dim(3)) * dtype_size(t.dtype);
}

class PagedAttention : public BackendOpTest {
 protected:
  PagedAttention() : BackendOpTest(20261203) {}

  Batch make_batch(DType dtype, const Heads& h, int64_t block_size,
                   const std::vector<SequenceShape>& shapes) {
    Batch b;
    b.h = h;
    int64_t n = 0, num_blocks = 2;  // two spare blocks nobody reads
    for (const SequenceShape& s : shapes) {
      n += 1 + s.rows;
      num_blocks += (s.first_pos + s.rows + block_size - 1) / block_size;
    }
    b.q = input(DType::F32, {n, h.heads, h.head_dim}, 0.05f, 2.0f);
    b.k_pool = input(dtype, {num_blocks, block_size, h.kv_heads, h.head_dim});
    b.v_pool = input(dtype, {num_blocks, block_size, h.kv_heads, h.head_dim});
    b.out = output({n, h.heads, h.head_dim});
    std::vector<int32_t> order(static_cast<size_t>(num_blocks));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng_);
    std::vector<bool> read(static_cast<size_t>(num_blocks * block_size), false);
    b.owned.assign(static_cast<size_t>(n), false);
    size_t next_block = 0;
    int64_t row = 0;
    for (const SequenceShape& s : shapes) {
      std::vector<int32_t> table;
      const int64_t len = s.first_pos + s.rows;
      for (int64_t p = 0; p < len; p += block_size) table.push_back(order[next_block++]);
      for (int64_t p = 0; p < len; ++p)
        read[static_cast<size_t>(table[static_cast<size_t>(p / block_size)] * block_size + p % block_size)] =
            true;
      row += 1;
      for (int64_t r = row; r < row + s.rows; ++r) b.owned[static_cast<size_t>(r)] = true;
      b.sequences.push_back({.first_row = row, .rows = s.rows, .first_pos = s.first_pos, .blocks = {}});
      b.tables.push_back(std::move(table));
      row += s.rows;
    }
    for (size_t s = 0; s < b.sequences.size(); ++s) b.sequences[s].blocks = b.tables[s];
    const int64_t slot_elems = h.kv_heads * h.head_dim;
    for (GuardedBuffer* pool : {b.k_pool.get(), b.v_pool.get()}) {
      for (int64_t i = 0; i < pool->numel(); ++i)
        if (!read[static_cast<size_t>(i / slot_elems)]) pool->set(i, NAN);
      pool->snapshot();
    }
    for (int64_t r = 0; r < n; ++r)
      if (!b.owned[static_cast<size_t>(r)])
        for (int64_t i = 0; i < b.row_elems(); ++i) b.out->set(r * b.row_elems() + i, kUnowned);
    return b;
  }

  void run(const Batch& b, std::span<const Backend::PagedSequence> sequences) {
    backend_->paged_attention(b.q->tensor(), b.k_pool->tensor(), b.v_pool->tensor(), sequences, b.scores(),
                              b.out->tensor());
  }

  // attention() over a contiguous cache holding sequence s's positions, its query rows only.
  std::vector<float> contiguous_attention(const Batch& b, size_t s) {
    const Backend::PagedSequence& seq = b.sequences[s];
    const int64_t len = seq.first_pos + seq.rows, block_size = b.k_pool->tensor().dim(1);
    const DType dtype = b.k_pool->tensor().dtype;
    auto k = buffer(dtype, {len, b.h.kv_heads, b.h.head_dim});
    auto v = buffer(dtype, {len, b.h.kv_heads, b.h.head_dim});
    const size_t slot_size = static_cast<size_t>(b.h.kv_heads * b.h.head_dim) * dtype_size(dtype);
    for (int64_t p = 0; p < len; ++p) {
      const int64_t slot = seq.blocks[static_cast<size_t>(p / block_size)] * block_size + p % block_size;
      std::memcpy(static_cast<unsigned char*>(k->tensor().data) + static_cast<size_t>(p) * slot_size,
                  slot_bytes(*b.k_pool, slot), slot_size);
      std::memcpy(static_cast<unsigned char*>(v->tensor().data) + static_cast<size_t>(p) * slot_size,
                  slot_bytes(*b.v_pool, slot), slot_size);
    }
    auto q = buffer({seq.rows, b.h.heads, b.h.head_dim});
    const std::vector<float> all_q = b.q->values();
    const std::vector<float> q_rows = b.rows_of(all_q, seq);
    for (size_t i = 0; i < q_rows.size(); ++i) q->set(static_cast<int64_t>(i), q_rows[i]);
    auto out = output({seq.rows, b.h.heads, b.h.head_dim});
    backend_->attention(q->tensor(), k->tensor(), v->tensor(), seq.first_pos, b.scores(), out->tensor());
    return out->values();
  }

  // Every sequence's rows of `got` match the float64 reference.
  static void expect_reference_results(const Batch& b, const std::vector<float>& got) {
    const double tolerance = b.k_pool->tensor().dtype == DType::F16 ? kF16Probabilities : kF32;
    for (size_t s = 0; s < b.sequences.size(); ++s)
      EXPECT_TRUE(
          close_to_reference(b.rows_of(got, b.sequences[s]),
                             reference::paged_attention(b.q->tensor(), b.k_pool->tensor(), b.v_pool->tensor(),
                                                        b.sequences[s], b.scores()),
                             tolerance))
          << "sequence " << s;
  }

  // Every owned row equals attention() over a contiguous cache bit for bit; every other row
  // holds kUnowned.
  void expect_contiguous_results(const Batch& b, const std::vector<float>& got) {
    for (size_t s = 0; s < b.sequences.size(); ++s)
      EXPECT_EQ(b.rows_of(got, b.sequences[s]), contiguous_attention(b, s)) << "sequence " << s;
    expect_unowned_untouched(b, got);
  }

  static void expect_unowned_untouched(const Batch& b, const std::vector<float>& got) {
    for (size_t r = 0; r < b.owned.size(); ++r) {
      if (b.owned[r]) continue;
      for (int64_t i = 0; i < b.row_elems(); ++i) {
        ASSERT_EQ(got[r * static_cast<size_t>(b.row_elems()) + static_cast<size_t>(i)], kUnowned)
            << "row " << r << " belongs to no sequence";
      }
    }
  }
};

const std::vector<SequenceShape> kMixedBatch = {
    {1, 0}, {1, 37}, {5, 0}, {7, 13}, {1, 15}, {16, 16}, {0, 5}, {3, 60}, {1, 1},
};

// ---------------------------------------------------------------- paged_attention

TEST_P(PagedAttention, MatchesReference) {
  for (const DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    for (const Heads& h : {Heads{20, 6, 2}, Heads{64, 6, 2}, Heads{16, 4, 4}}) {
      for (const int64_t block_size : {1, 4, 16}) {
        SCOPED_TRACE(label(dtype, h, block_size));
        const Batch b = make_batch(dtype, h, block_size, kMixedBatch);
        run(b, b.sequences);
        const std::vector<float> got = b.out->values();
        expect_reference_results(b, got);
        expect_unowned_untouched(b, got);
        EXPECT_GUARDS(b.out);
        EXPECT_UNCHANGED(b.q);
        EXPECT_UNCHANGED(b.k_pool);
        EXPECT_UNCHANGED(b.v_pool);
      }
    }
  }
}

TEST_P(PagedAttention, EqualsContiguousAttentionWhateverTheBatchAndThreads) {
  for (const DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    for (const int64_t block_size : {1, 4, 16}) {
      for (const Heads& h : {Heads{20, 6, 2}, Heads{64, 6, 2}}) {  // AMX tiles take the second
        SCOPED_TRACE(label(dtype, h, block_size));
        const Batch b = make_batch(dtype, h, block_size, kMixedBatch);
        for (const int threads : {1, 2}) {
          SCOPED_TRACE("threads=" + std::to_string(threads));
          set_thread_count(threads);
          run(b, b.sequences);
          expect_contiguous_results(b, b.out->values());
          // Each sequence alone in the call: the same bits again.
          b.out->fill(kUnowned);
          for (const Backend::PagedSequence& seq : b.sequences) run(b, std::span(&seq, 1));
          expect_contiguous_results(b, b.out->values());
        }
        set_thread_count(0);
      }
    }
  }
}

// Sliding windows, soft-capped scores and attention sinks, paged as contiguous: windows
// shorter than some sequences' prefills and contexts, and of one position.
TEST_P(PagedAttention, WindowedAndSoftCappedBatchesMatchTheReferenceAndContiguousAttention) {
  struct Scores {
    int64_t window;
    float softcap;
    bool sinks;
  };
  for (const DType dtype : {DType::F32, DType::F16}) {
    for (const Scores& s : {Scores{1, 0.0f, false}, Scores{6, 0.0f, false}, Scores{20, 3.0f, false},
                            Scores{0, 1.0f, false}, Scores{0, 0.0f, true}, Scores{6, 0.0f, true}}) {
      const Heads h{64, 6, 2};
      SCOPED_TRACE(label(dtype, h, 4) + " window=" + std::to_string(s.window) +
                   " softcap=" + std::to_string(s.softcap) + (s.sinks ? " sinks" : ""));
      Batch b = make_batch(dtype, h, 4, kMixedBatch);
      b.window = s.window;
      b.softcap = s.softcap;
      if (s.sinks) b.sinks = input(DType::F32, {h.heads}, -2.0f, 3.0f);
      run(b, b.sequences);
      const std::vector<float> got = b.out->values();
      expect_reference_results(b, got);
      expect_contiguous_results(b, got);
    }
  }
}

// One sequence's decode step over a long context splits its positions among the threads
// (the CPU backend): paged or contiguous, every thread count gives the bits of one thread.
TEST_P(PagedAttention, ALongDecodeStepGetsTheBitsOfOneThread) {
  for (const DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    const Heads h{64, 9, 3};
    SCOPED_TRACE(label(dtype, h, 16));
    const Batch b = make_batch(dtype, h, 16, {{1, 2500}});
    set_thread_count(1);
    const std::vector<float> one_thread = contiguous_attention(b, 0);
    for (const int threads : {2, 3, 4}) {
      set_thread_count(threads);
      run(b, b.sequences);
      EXPECT_EQ(b.rows_of(b.out->values(), b.sequences[0]), one_thread) << threads << " threads, paged";
      EXPECT_EQ(contiguous_attention(b, 0), one_thread) << threads << " threads, contiguous";
    }
    set_thread_count(0);
  }
}

// Long rows next to short ones in one call (the CUDA backend cuts rows of more than 512
// positions into splits that separate blocks walk, attention_splits.h): against the float64
// reference, and each row the bits of attention() over a contiguous cache with that
// sequence alone.
TEST_P(PagedAttention, LongAndShortRowsInOneBatch) {
  const std::vector<SequenceShape> shapes = {{1, 2500}, {1, 30}, {3, 900}, {1, 511}, {2, 511}, {1, 5000}};
  for (const DType dtype : {DType::F32, DType::F16}) {
    const Heads h{64, 8, 2};
    SCOPED_TRACE(label(dtype, h, 16));
    const Batch b = make_batch(dtype, h, 16, shapes);
    run(b, b.sequences);
    const std::vector<float> got = b.out->values();
    for (size_t s = 0; s < b.sequences.size(); ++s)
      EXPECT_TRUE(
          close_to_reference(b.rows_of(got, b.sequences[s]),
                             reference::paged_attention(b.q->tensor(), b.k_pool->tensor(), b.v_pool->tensor(),
                                                        b.sequences[s], b.scores()),
                             dtype == DType::F16 ? kF16Probabilities : kF32))
          << "sequence " << s;
    expect_contiguous_results(b, got);
  }
}

TEST_P(PagedAttention, SpreadsADecodeBatchWithoutChangingResults) {
  std::uniform_int_distribution<int64_t> position(0, 200);
  std::vector<SequenceShape> decode;
  for (int i = 0; i < 64; ++i) decode.push_back({1, position(rng_)});
  for (const DType dtype : {DType::F32, DType::F16}) {
    const Heads h{64, 8, 2};
    SCOPED_TRACE(label(dtype, h, 16));
    const Batch b = make_batch(dtype, h, 16, decode);
    for (const int threads : {1, 2, 3}) {
      set_thread_count(threads);
      run(b, b.sequences);
      expect_contiguous_results(b, b.out->values());
    }
    set_thread_count(0);
    EXPECT_GUARDS(b.out);
  }
}

TEST_P(PagedAttention, RejectsBadArguments) {
  const Batch b = make_batch(DType::F32, Heads{16, 4, 2}, 4, {{2, 5}, {1, 0}});
  const auto expect_rejected = [&](std::vector<Backend::PagedSequence> sequences, const char* what) {
    EXPECT_THROW(run(b, sequences), Error) << what;
  };
  Backend::PagedSequence first = b.sequences[0], second = b.sequences[1];
  const std::vector<int32_t> outside = {b.tables[0][0], 99};
  const std::vector<int32_t> negative = {-1, b.tables[0][1]};
  const std::vector<int32_t> too_short = {b.tables[0][0]};
  expect_rejected({{first.first_row, first.rows, first.first_pos, outside}, second},
                  "block outside the pool");
  expect_rejected({{first.first_row, first.rows, first.first_pos, negative}, second}, "negative block id");
  expect_rejected({{first.first_row, first.rows, first.first_pos, too_short}, second}, "table too short");
  expect_rejected({first, {first.first_row + 1, 1, 0, second.blocks}}, "overlapping row ranges");
  expect_rejected({first, {b.q->tensor().dim(0), 1, 0, second.blocks}}, "rows past q");
  expect_rejected({first, {-1, 1, 0, second.blocks}}, "negative first row");
  expect_rejected({first, {second.first_row, -1, 0, second.blocks}}, "negative rows");
  expect_rejected({first, {second.first_row, 1, -1, second.blocks}}, "negative first_pos");
  for (const float x : b.out->values())  // owned rows still NaN, the others kUnowned
    ASSERT_TRUE(std::isnan(x) || x == kUnowned) << "out written by a rejected call";

  const Tensor& q = b.q->tensor();
  const Tensor& out = b.out->tensor();
  const Tensor& k = b.k_pool->tensor();
  const int64_t blocks = k.dim(0);                          // each pool below has one fault only
  auto odd_blocks = input(DType::F32, {blocks, 3, 2, 16});  // block size 3: not a power of two
  auto half = input(DType::BF16, {blocks, 4, 2, 16});
  auto wide = input(DType::F32, {blocks, 4, 2, 32});
  auto three_kv = input(DType::F32, {blocks, 4, 3, 16});
  auto more_blocks = input(DType::F32, {blocks + 1, 4, 2, 16});
  auto flat = input(DType::F32, {blocks * 4, 2, 16});
  const AttentionScores scale = b.scores();
  const auto paged = [&](const Tensor& kp, const Tensor& vp, const Tensor& o) {
    backend_->paged_attention(q, kp, vp, b.sequences, scale, o);
  };
  EXPECT_THROW(paged(odd_blocks->tensor(), odd_blocks->tensor(), out), Error) << "block size 3";
  EXPECT_THROW(paged(k, half->tensor(), out), Error) << "k and v dtypes differ";
  EXPECT_THROW(paged(k, more_blocks->tensor(), out), Error) << "k and v shapes differ";
  EXPECT_THROW(paged(wide->tensor(), wide->tensor(), out), Error) << "head_dim differs from q";
  EXPECT_THROW(paged(three_kv->tensor(), three_kv->tensor(), out), Error) << "4 heads over 3 kv heads";
  EXPECT_THROW(paged(flat->tensor(), flat->tensor(), out), Error) << "pool of rank 3";
  EXPECT_THROW(paged(k, b.v_pool->tensor(), out.reshaped({out.numel()}).slice_rows(0, 8)), Error)
      << "out smaller than q";
  EXPECT_THROW(paged(k, b.v_pool->tensor(), q), Error) << "out is q";
  EXPECT_GUARDS(b.out);
  EXPECT_UNCHANGED(b.k_pool);
  EXPECT_UNCHANGED(b.v_pool);
}

// ---------------------------------------------------------------- store_kv

TEST_P(PagedAttention, StoreKvWritesConvertedRowsIntoTheirSlots) {
  for (const DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(dtype));
    auto pool = input(dtype, {5, 4, 2, 20});
    auto rows = input(DType::F32, {6, 2, 20}, 0.05f, 3.0f);
    // Round-to-nearest-even ties of f16 (1 + 2^-11, 1 + 3 * 2^-11) and bf16 (1 + 2^-8).
    rows->set(0, 1.0f + 0x1p-11f);
    rows->set(1, 1.0f + 3 * 0x1p-11f);
    rows->set(2, 1.0f + 0x1p-8f);
    rows->set(3, -(1.0f + 3 * 0x1p-8f));
    rows->snapshot();
    const std::vector<int64_t> slots = {17, 3, 0, 19, 8, 9};
    // Expected: the pool as it was, with convert()'s output rows in the slots.
    auto converted = buffer(dtype, {6, 2, 20});
    backend_->convert(rows->tensor(), converted->tensor());
    synchronize();
    const size_t slot_size = 2 * 20 * dtype_size(dtype);
    std::vector<unsigned char> want(
        static_cast<const unsigned char*>(pool->tensor().data),
        static_cast<const unsigned char*>(pool->tensor().data) + pool->tensor().nbytes());
    for (size_t r = 0; r < slots.size(); ++r)
      std::memcpy(want.data() + static_cast<size_t>(slots[r]) * slot_size,
                  static_cast<const unsigned char*>(converted->tensor().data) + r * slot_size, slot_size);
    const std::vector<double> reference_pool = reference::store_kv(rows->tensor(), slots, pool->tensor());

    backend_->store_kv(rows->tensor(), slots, pool->tensor());
    synchronize();
    EXPECT_EQ(std::memcmp(want.data(), pool->tensor().data, want.size()), 0);
    EXPECT_TRUE(close_to_reference(pool->values(), reference_pool, 0.0));
    EXPECT_GUARDS(pool);
    EXPECT_UNCHANGED(rows);

    pool->snapshot();
    backend_->store_kv(rows->tensor().slice_rows(0, 0), {}, pool->tensor());
    EXPECT_UNCHANGED(pool);
  }
}

TEST_P(PagedAttention, StoreKvRejectsBadArguments) {
  auto pool = input(DType::F16, {3, 4, 2, 16});
  auto rows = input(DType::F32, {3, 2, 16});
  auto half_rows = input(DType::BF16, {3, 2, 16});
  auto wide_rows = input(DType::F32, {3, 2, 32});
  auto flat_pool = input(DType::F16, {12, 2, 16});
  const auto store = [&](const Tensor& r, std::vector<int64_t> slots, const Tensor& p) {
    backend_->store_kv(r, slots, p);
  };
  EXPECT_THROW(store(rows->tensor(), {0, 12, 1}, pool->tensor()), Error) << "slot past the pool";
  EXPECT_THROW(store(rows->tensor(), {0, -1, 1}, pool->tensor()), Error) << "negative slot";
  EXPECT_THROW(store(rows->tensor(), {5, 2, 5}, pool->tensor()), Error) << "duplicate slots";
  EXPECT_THROW(store(rows->tensor(), {0, 1}, pool->tensor()), Error) << "fewer slots than rows";
  EXPECT_THROW(store(half_rows->tensor(), {0, 1, 2}, pool->tensor()), Error) << "rows not f32";
  EXPECT_THROW(store(wide_rows->tensor(), {0, 1, 2}, pool->tensor()), Error) << "row shape differs";
  EXPECT_THROW(store(rows->tensor(), {0, 1, 2}, flat_pool->tensor()), Error) << "pool of rank 3";
  EXPECT_UNCHANGED(pool);
  EXPECT_GUARDS(pool);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, PagedAttention, ::testing::ValuesIn(attention_backends_under_test()),
                         backend_test_name);

}  // namespace
}  // namespace tokenmill::testing
