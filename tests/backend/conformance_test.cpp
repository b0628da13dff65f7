// Backend conformance: every op of every available backend against the float64 reference
// (backend/reference/reference_ops.h), on seeded random inputs that are never zero.
//
// Tolerances. Errors are measured as max |got - reference| / max |reference| over one
// output tensor (relative to the output's largest magnitude):
//  - kExact (0): ops that only move or widen values (embedding gather).
//  - kF32: 1e-5 for all f32 arithmetic, transcendental ops included (the backend's exp,
//    tanh-via-sigmoid and erfc approximations are accurate to a few f32 ulps).
//  - bf16 / f16 weights and caches: the reference reads the same rounded values the
//    backend reads (load_as_f32; for a backend that rounds matmul activations to the
//    weights' dtype, the rounded activations too: matmul_activations.h), so only the f32
//    arithmetic differs: kF32 again. (Against
//    a float64 model with unrounded weights the error would be ~1e-2 for bf16; that is a
//    property of the weights, not of the backend, and is not what this suite measures.)
//  - kF16Probabilities: 1e-3 for attention over an f16 cache, whose softmax probabilities
//    are rounded to f16 (Backend::attention): the backend rounds its f32 probability, the
//    reference its float64 one, and the two may land on either side of an f16 rounding
//    midpoint, one f16 ulp (2^-11 relative) apart.
//
// Every output sits between canary bytes that must survive the op, inputs must be left
// unchanged, and inputs sit at unaligned addresses. Each backend runs every case; the CPU
// backend runs once per instruction set (AVX2 and AVX-512 when the CPU has it).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/reference/reference_ops.h"
#include "conformance_harness.h"
#include "core/error.h"
#include "core/parallel.h"
#include "matmul_activations.h"

namespace tokenmill::testing {
namespace {

constexpr double kExact = 0.0;
constexpr double kF32 = 1e-5;
constexpr double kF16Probabilities = 1e-3;

class Conformance : public BackendOpTest {
 protected:
  Conformance() : BackendOpTest(20240611) {}

  // attention() over the caches k and v for the tokens [t0, t0 + count) of q ([n, heads,
  // head_dim], token t at position first_pos + t), in one call: their outputs.
  std::vector<float> attention_of_tokens(const GuardedBuffer& q, const GuardedBuffer& k,
                                         const GuardedBuffer& v, int64_t first_pos, int64_t t0, int64_t count,
                                         const AttentionScores& scores) {
    const Tensor& all = q.tensor();
    const int64_t width = all.dim(1) * all.dim(2);
    auto q_call = buffer(DType::F32, {count, all.dim(1), all.dim(2)});
    auto out = output({count, all.dim(1), all.dim(2)});
    for (int64_t i = 0; i < count * width; ++i) q_call->set(i, q.get(t0 * width + i));
    backend_->attention(q_call->tensor(), k.tensor(), v.tensor(), first_pos + t0, scores, out->tensor());
    EXPECT_GUARDS(out);
    return out->values();
  }
};

std::string dtype_label(DType t) { return std::string(dtype_name(t)); }

// ---------------------------------------------------------------- embedding, combine_rows

TEST_P(Conformance, EmbeddingGathersRowsOfEveryDtype) {
  for (const DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    for (const int64_t d : {1, 17, 64, 80}) {
      SCOPED_TRACE(dtype_label(dtype) + " d=" + std::to_string(d));
      const int64_t vocab = 37;
      auto table = input(dtype, {vocab, d});
      const std::vector<int32_t> ids = {0, 36, 5, 5, 17, 1, 35, 0, 20};
      auto out = output({static_cast<int64_t>(ids.size()), d});
      backend_->embedding(table->tensor(), ids, out->tensor());
      EXPECT_TRUE(close_to_reference(out->values(), reference::embedding(table->tensor(), ids), kExact));
      EXPECT_GUARDS(out);
      EXPECT_UNCHANGED(table);
    }
  }
}

TEST_P(Conformance, EmbeddingRejectsOutOfRangeIdsAndBadShapes) {
  auto table = input(DType::BF16, {10, 8});
  auto out = output({2, 8});
  const std::vector<int32_t> negative = {1, -1}, too_big = {10, 1}, ok = {1, 2}, three = {1, 2, 3};
  EXPECT_THROW(backend_->embedding(table->tensor(), negative, out->tensor()), Error);
  EXPECT_THROW(backend_->embedding(table->tensor(), too_big, out->tensor()), Error);
  EXPECT_THROW(backend_->embedding(table->tensor(), three, out->tensor()), Error);
  auto narrow = output({2, 7});
  EXPECT_THROW(backend_->embedding(table->tensor(), ok, narrow->tensor()), Error);
  auto bf16_out = buffer(DType::BF16, {2, 8});
  EXPECT_THROW(backend_->embedding(table->tensor(), ok, bf16_out->tensor()), Error);
  EXPECT_GUARDS(out);
}

TEST_P(Conformance, CombineRowsSumsWeightedGatheredRows) {
  // A mixture of experts' combine: 5 tokens, each the weighted sum of k rows of the experts'
  // outputs (k = 1, 2, 3; rows repeated across tokens, as experts serve many tokens).
  for (const int64_t k : {1, 2, 3}) {
    for (const int64_t d : {1, 17, 64}) {
      SCOPED_TRACE("k=" + std::to_string(k) + " d=" + std::to_string(d));
      const int64_t m = 7, n = 5;
      auto x = input(DType::F32, {m, d});
      std::vector<int32_t> rows;
      std::vector<float> scales;
      for (int64_t i = 0; i < n * k; ++i) {
        rows.push_back(static_cast<int32_t>((i * 3 + 1) % m));
        scales.push_back(0.25f + 0.125f * static_cast<float>(i % 5) - (i % 2 == 0 ? 0.5f : 0.0f));
      }
      auto y = output({n, d});
      backend_->combine_rows(x->tensor(), rows, scales, y->tensor());
      EXPECT_TRUE(
          close_to_reference(y->values(), reference::combine_rows(x->tensor(), rows, scales, n), kF32));
      EXPECT_GUARDS(y);
      EXPECT_UNCHANGED(x);
    }
  }
}

TEST_P(Conformance, CombineRowsRejectsBadArguments) {
  auto x = input(DType::F32, {4, 8});
  auto y = output({2, 8});
  const std::vector<int32_t> ok = {0, 3, 1, 2}, out_of_range = {0, 4, 1, 2}, odd = {0, 1, 2};
  const std::vector<float> four = {1, 1, 1, 1}, three = {1, 1, 1};
  EXPECT_THROW(backend_->combine_rows(x->tensor(), out_of_range, four, y->tensor()), Error);
  EXPECT_THROW(backend_->combine_rows(x->tensor(), odd, three, y->tensor()), Error);
  EXPECT_THROW(backend_->combine_rows(x->tensor(), ok, three, y->tensor()), Error);
  auto narrow = output({2, 7});
  EXPECT_THROW(backend_->combine_rows(x->tensor(), ok, four, narrow->tensor()), Error);
  EXPECT_THROW(backend_->combine_rows(x->tensor(), ok, four, x->tensor().slice_rows(0, 2)), Error);
  EXPECT_GUARDS(y);
}

// ---------------------------------------------------------------- matmul

struct MatmulShape {
  int64_t n, k, m;
};

// Decode (n <= 4) and prefill shapes: odd k (vector tails), k past one 256-wide GEMM block,
// m not a multiple of any panel or of the GEMV's stream count, m = 1, n = 1 / 3 / 37.
const MatmulShape kMatmulShapes[] = {
    {1, 1, 1},
    {1, 576, 96},
    {1, 33, 1},
    {1, 100, 67},
    {2, 47, 19},
    {3, 31, 35},
    {4, 257, 9},
    {5, 64, 70},
    {3, 768, 40},
    {13, 300, 33},
    {37, 100, 67},
    {37, 17, 1},
    {37, 513, 50},
    {64, 64, 96},
    {6, 8, 16},
    {12, 16, 32},
    {25, 40, 130},
    {70, 100, 300},
    // More than one task's worth of token tiles and k in several blocks (AMX: 16 tiles of 32
    // tokens, 1024-deep blocks), the last block's last step partial.
    {520, 1100, 40},
    // GEMV k tails: a partial last vector after a few whole ones.
    {1, 53, 20},
    {2, 29, 13},
    {3, 61, 17},
    {4, 45, 11},
};

TEST_P(Conformance, MatmulMatchesReferenceForEveryWeightDtypeAndShape) {
  for (const DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    for (const MatmulShape& s : kMatmulShapes) {
      for (const bool with_bias : {false, true}) {
        SCOPED_TRACE(dtype_label(dtype) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) +
                     " m=" + std::to_string(s.m) + (with_bias ? " +bias" : ""));
        auto x = input(DType::F32, {s.n, s.k});
        auto w = input(dtype, {s.m, s.k});
        auto bias = input(DType::F32, {s.m});
        auto y = output({s.n, s.m});
        const Tensor* b = with_bias ? bias->ptr() : nullptr;
        backend_->matmul(x->tensor(), w->tensor(), b, y->tensor());
        const MatmulActivations x_read(GetParam(), *x, dtype);
        EXPECT_TRUE(
            close_to_reference(y->values(), reference::matmul(x_read.tensor(), w->tensor(), b), kF32));
        EXPECT_GUARDS(y);
        EXPECT_UNCHANGED(x);
        EXPECT_UNCHANGED(w);
      }
    }
  }
}

// Operands at aligned addresses, as the loaders place weights: the CUDA backend adds such an
// f32 bias in cuBLASLt's epilogue (the misaligned inputs above take its other path).
TEST_P(Conformance, MatmulAddsAnAlignedBias) {
  const auto aligned_input = [&](DType dtype, std::initializer_list<int64_t> dims) {
    auto b = buffer(dtype, dims);
    b->fill_random(rng_);
    return b;
  };
  for (const DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    for (const MatmulShape& s : kMatmulShapes) {
      SCOPED_TRACE(dtype_label(dtype) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) +
                   " m=" + std::to_string(s.m));
      auto x = aligned_input(DType::F32, {s.n, s.k});
      auto w = aligned_input(dtype, {s.m, s.k});
      auto bias = aligned_input(DType::F32, {s.m});
      auto y = output({s.n, s.m});
      backend_->matmul(x->tensor(), w->tensor(), bias->ptr(), y->tensor());
      const MatmulActivations x_read(GetParam(), *x, dtype);
      EXPECT_TRUE(close_to_reference(y->values(),
                                     reference::matmul(x_read.tensor(), w->tensor(), bias->ptr()), kF32));
      EXPECT_GUARDS(y);
    }
  }
}

TEST_P(Conformance, MatmulAcceptsHalfPrecisionBias) {
  for (const DType bias_dtype : {DType::BF16, DType::F16}) {
    for (const int64_t n : {1, 9}) {
      auto x = input(DType::F32, {n, 40});
      auto w = input(DType::BF16, {21, 40});
      auto bias = input(bias_dtype, {21});
      auto y = output({n, 21});
      backend_->matmul(x->tensor(), w->tensor(), bias->ptr(), y->tensor());
      const MatmulActivations x_read(GetParam(), *x, DType::BF16);
      EXPECT_TRUE(close_to_reference(y->values(),
                                     reference::matmul(x_read.tensor(), w->tensor(), bias->ptr()), kF32));
      EXPECT_GUARDS(y);
    }
  }
}

TEST_P(Conformance, MatmulWithEmptyKWritesTheBias) {
  auto x = buffer(DType::F32, {3, 0});
  auto w = buffer(DType::F32, {5, 0});
  auto bias = input(DType::F32, {5});
  auto y = output({3, 5});
  backend_->matmul(x->tensor(), w->tensor(), bias->ptr(), y->tensor());
  EXPECT_TRUE(
      close_to_reference(y->values(), reference::matmul(x->tensor(), w->tensor(), bias->ptr()), kExact));
}

TEST_P(Conformance, MatmulIsBitwiseIndependentOfThreadCount) {
  for (const DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    for (const auto& [n, k] :
         {std::pair<int64_t, int64_t>{1, 300}, {2, 300}, {3, 300}, {4, 300}, {37, 300}, {520, 1100}}) {
      auto x = input(DType::F32, {n, k});
      auto w = input(dtype, {1030, k});
      auto y1 = output({n, 1030});
      auto y2 = output({n, 1030});
      set_thread_count(1);
      backend_->matmul(x->tensor(), w->tensor(), nullptr, y1->tensor());
      set_thread_count(0);
      backend_->matmul(x->tensor(), w->tensor(), nullptr, y2->tensor());
      EXPECT_EQ(y1->values(), y2->values()) << dtype_label(dtype) << " n=" << n << " k=" << k;
    }
  }
}

// The bit patterns of v: == on floats would take -0 for +0.
std::vector<uint32_t> bits_of(const std::vector<float>& v) {
  std::vector<uint32_t> bits;
  for (const float f : v) bits.push_back(std::bit_cast<uint32_t>(f));
  return bits;
}

// The CPU's decode GEMV sums each row of w in one order whatever the number of tokens
// (1 to 4), so a sequence decoded alone or beside up to three others gets the same bits from
// every matmul, though the kernel reads 4 or 2 rows at once depending on it. k: shorter
// than a vector, whole vectors and a partial one, and long enough (with four threads) for
// the rows to be split between threads; m odd: rows left over after the equal ranges.
TEST_P(Conformance, MatmulGivesEachDecodeTokenTheBitsOfAOneTokenCall) {
  if (GetParam().name.rfind("cpu", 0) != 0) GTEST_SKIP() << "a promise of the CPU kernels";
  set_thread_count(4);
  constexpr int64_t m = 517;
  for (const DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    for (const int64_t k : {int64_t{13}, int64_t{300}, int64_t{2048}}) {
      auto w = input(dtype, {m, k});
      auto bias = input(DType::F32, {m});
      for (int64_t n = 2; n <= 4; ++n) {
        SCOPED_TRACE(dtype_label(dtype) + " k=" + std::to_string(k) + " n=" + std::to_string(n));
        auto x = input(DType::F32, {n, k});
        auto y = output({n, m});
        backend_->matmul(x->tensor(), w->tensor(), bias->ptr(), y->tensor());
        EXPECT_GUARDS(y);
        const std::vector<float> ys = y->values();
        for (int64_t t = 0; t < n; ++t) {
          const Tensor x_row(static_cast<float*>(x->tensor().data) + t * k, DType::F32, {1, k});
          auto y1 = output({1, m});
          backend_->matmul(x_row, w->tensor(), bias->ptr(), y1->tensor());
          EXPECT_GUARDS(y1);
          const std::vector<float> y_row(ys.begin() + t * m, ys.begin() + (t + 1) * m);
          EXPECT_EQ(bits_of(y1->values()), bits_of(y_row)) << "token " << t;
        }
      }
    }
  }
  set_thread_count(0);
}

// matmul_shared promises matmul()'s bits for every target: decode and prefill shapes, m not
// a multiple of 8 (a first target of 7 rows: the threads' split of the CPU's one-pass GEMV
// then falls inside the next target at another row than matmul's), biases of several dtypes, mixed weight
// dtypes (AMX takes only bf16: then the targets cannot share a GEMM), and four targets (more than the CPU
// shares in one pass). Four threads, and a long k for one token (small grains), so the decode rows are split
// inside the targets.
TEST_P(Conformance, MatmulSharedGivesEachTargetMatmulsBits) {
  set_thread_count(4);
  const std::vector<std::vector<DType>> dtype_sets = {{DType::F32, DType::F32, DType::F32},
                                                      {DType::BF16, DType::BF16, DType::BF16},
                                                      {DType::F16, DType::F16},
                                                      {DType::BF16, DType::F32, DType::BF16},
                                                      {DType::F32, DType::BF16, DType::F16, DType::F32}};
  const int64_t rows_of[] = {7, 70, 33, 96};
  const DType bias_of[] = {DType::F32, DType::BF16, DType::F32, DType::F16};
  for (const std::vector<DType>& dtypes : dtype_sets) {
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{1, 300},
                               {1, 4096},
                               {2, 2048},
                               {3, 64},
                               {4, 257},
                               {5, 300},
                               {37, 100},
                               {520, 1100}}) {
      SCOPED_TRACE(std::to_string(dtypes.size()) + " targets, first " + dtype_label(dtypes[0]) +
                   ", n=" + std::to_string(n) + " k=" + std::to_string(k));
      auto x = input(DType::F32, {n, k});
      std::vector<std::unique_ptr<GuardedBuffer>> w, bias, y, expected;
      std::vector<Backend::MatmulTarget> targets;
      for (size_t i = 0; i < dtypes.size(); ++i) {
        w.push_back(input(dtypes[i], {rows_of[i], k}));
        bias.push_back(input(bias_of[i], {rows_of[i]}));
        y.push_back(output({n, rows_of[i]}));
        expected.push_back(output({n, rows_of[i]}));
        const Tensor* b = i == 2 ? nullptr : bias.back()->ptr();
        backend_->matmul(x->tensor(), w.back()->tensor(), b, expected.back()->tensor());
        targets.push_back({w.back()->ptr(), b, y.back()->ptr()});
      }
      backend_->matmul_shared(x->tensor(), targets);
      for (size_t i = 0; i < dtypes.size(); ++i) {
        EXPECT_EQ(bits_of(y[i]->values()), bits_of(expected[i]->values())) << "target " << i;
        EXPECT_GUARDS(y[i]);
      }
      EXPECT_UNCHANGED(x);
    }
  }
  set_thread_count(0);
}

// A quantized bias is refused up front, by matmul and by matmul_shared before any target is
// written.
TEST_P(Conformance, MatmulRejectsAQuantizedBias) {
  auto x = input(DType::F32, {2, 16});
  auto w = input(DType::F32, {32, 16});
  auto bias = input(DType::F32, {32});
  auto bias_q8 = buffer(DType::Q8_0, {32});
  auto y = output({2, 32});
  auto y2 = output({2, 32});
  EXPECT_THROW(backend_->matmul(x->tensor(), w->tensor(), bias_q8->ptr(), y->tensor()), Error);
  const Backend::MatmulTarget targets[] = {{w->ptr(), bias->ptr(), y->ptr()},
                                           {w->ptr(), bias_q8->ptr(), y2->ptr()}};
  EXPECT_THROW(backend_->matmul_shared(x->tensor(), targets), Error);
  for (const float v : y->values()) ASSERT_TRUE(std::isnan(v)) << "a refused call wrote y";
  for (const float v : y2->values()) ASSERT_TRUE(std::isnan(v)) << "a refused call wrote y2";
}

TEST_P(Conformance, MatmulRejectsMismatchedShapesAndAliasing) {
  auto x = input(DType::F32, {2, 16});
  auto w = input(DType::F32, {8, 16});
  auto w_wrong_k = input(DType::F32, {8, 15});
  auto y = output({2, 8});
  auto y_wrong = output({2, 9});
  auto y_rows = output({3, 8});
  auto bias_wrong = input(DType::F32, {7});
  auto x_bf16 = input(DType::BF16, {2, 16});
  EXPECT_THROW(backend_->matmul(x->tensor(), w_wrong_k->tensor(), nullptr, y->tensor()), Error);
  EXPECT_THROW(backend_->matmul(x->tensor(), w->tensor(), nullptr, y_wrong->tensor()), Error);
  EXPECT_THROW(backend_->matmul(x->tensor(), w->tensor(), nullptr, y_rows->tensor()), Error);
  EXPECT_THROW(backend_->matmul(x->tensor(), w->tensor(), bias_wrong->ptr(), y->tensor()), Error);
  EXPECT_THROW(backend_->matmul(x_bf16->tensor(), w->tensor(), nullptr, y->tensor()), Error);
  auto square_x = input(DType::F32, {2, 8});
  auto square_w = input(DType::F32, {8, 8});
  EXPECT_THROW(backend_->matmul(square_x->tensor(), square_w->tensor(), nullptr, square_x->tensor()), Error);
  EXPECT_THROW(backend_->matmul(x->tensor(), w->tensor().reshaped({2, 64}), nullptr, y->tensor()), Error);
  // matmul_shared checks every target as matmul does, and that no y overlaps another
  // target's y, w or bias, before it writes any output.
  auto y2 = output({2, 8});
  const Backend::MatmulTarget bad_weight[] = {{w->ptr(), nullptr, y->ptr()},
                                              {w_wrong_k->ptr(), nullptr, y2->ptr()}};
  EXPECT_THROW(backend_->matmul_shared(x->tensor(), bad_weight), Error);
  const Backend::MatmulTarget bad_output[] = {{w->ptr(), nullptr, y->ptr()},
                                              {w->ptr(), nullptr, y_wrong->ptr()}};
  EXPECT_THROW(backend_->matmul_shared(x->tensor(), bad_output), Error);
  const Backend::MatmulTarget same_y[] = {{w->ptr(), nullptr, y->ptr()}, {w->ptr(), nullptr, y->ptr()}};
  EXPECT_THROW(backend_->matmul_shared(x->tensor(), same_y), Error);
  auto w_as_y = output({8, 16});  // the second target writes over the first one's weights
  const Tensor y_over_w = w_as_y->tensor().reshaped({16, 8}).slice_rows(0, 2);
  const Backend::MatmulTarget y_over_weights[] = {{w_as_y->ptr(), nullptr, y->ptr()},
                                                  {w->ptr(), nullptr, &y_over_w}};
  EXPECT_THROW(backend_->matmul_shared(x->tensor(), y_over_weights), Error);
  const Backend::MatmulTarget missing_y[] = {{w->ptr(), nullptr, y->ptr()}, {w->ptr(), nullptr, nullptr}};
  EXPECT_THROW(backend_->matmul_shared(x->tensor(), missing_y), Error);
  for (const float v : y->values()) ASSERT_TRUE(std::isnan(v)) << "a refused call wrote y";
  EXPECT_GUARDS(y);
  EXPECT_GUARDS(y_wrong);
}

// ---------------------------------------------------------------- add_lora

// One adapter's segment of an add_lora call, its a [rank, k] and b [m, rank] scaled so that
// the adapter's term is about as large as y's prefilled values (a prefill the op dropped
// would show).
struct LoraCase {
  int64_t first_row, rows, rank;
};

TEST_P(Conformance, AddLoraAddsEachSegmentsAdapterToItsRows) {
  // Ranks 1 to the largest, row counts 1 to 33, two segments back to back, gaps between the
  // others and uncovered rows at both ends (rows 0, 4-5, 39, 47-48 and 57 of 58).
  const LoraCase cases[] = {{1, 2, 3}, {3, 1, 1}, {6, 33, 64}, {40, 7, 300}, {49, 7, 16}, {56, 1, 1024}};
  const int64_t n = 58;
  // k and m: a single element, and odd sizes past a warp, a vector and a block of threads.
  for (const auto& shape : {std::pair<int64_t, int64_t>{1, 200}, {47, 1}, {576, 33}}) {
    const int64_t k = shape.first, m = shape.second;  // a lambda below reads m: no structured binding
    SCOPED_TRACE("k=" + std::to_string(k) + " m=" + std::to_string(m));
    auto x = input({n, k});
    auto y = input({n, m});
    std::vector<std::unique_ptr<GuardedBuffer>> adapters;
    std::vector<Backend::LoraSegment> segments;
    for (const LoraCase& c : cases) {
      const float a_scale = 1.0f / std::sqrt(static_cast<float>(k)),
                  b_scale = 1.0f / std::sqrt(static_cast<float>(c.rank));
      adapters.push_back(input({c.rank, k}, 0.05f * a_scale, a_scale));
      adapters.push_back(input({m, c.rank}, 0.05f * b_scale, b_scale));
      segments.push_back({.first_row = c.first_row,
                          .rows = c.rows,
                          .a = adapters[adapters.size() - 2]->ptr(),
                          .b = adapters.back()->ptr()});
    }
    std::vector<float> before = y->values();
    const Tensor y_before(before.data(), DType::F32, {n, m});
    const std::vector<double> want = reference::add_lora(x->tensor(), segments, y_before);
    backend_->add_lora(x->tensor(), segments, y->tensor());
    const std::vector<float> got = y->values();
    EXPECT_TRUE(close_to_reference(got, want, kF32));
    std::vector<bool> covered(static_cast<size_t>(n), false);
    for (const LoraCase& c : cases) std::fill_n(covered.begin() + c.first_row, c.rows, true);
    for (int64_t r = 0; r < n; ++r) {
      if (covered[static_cast<size_t>(r)]) continue;
      const auto row = [&](const std::vector<float>& v) {
        return bits_of(std::vector<float>(v.begin() + r * m, v.begin() + (r + 1) * m));
      };
      EXPECT_EQ(row(got), row(before)) << "row " << r << " is in no segment but changed";
    }
    EXPECT_GUARDS(y);
    EXPECT_UNCHANGED(x);
    for (const auto& adapter : adapters) EXPECT_UNCHANGED(adapter);
  }
}

TEST_P(Conformance, AddLoraWithoutSegmentsLeavesYAlone) {
  auto x = input({5, 12});
  auto y = input({5, 7});
  backend_->add_lora(x->tensor(), {}, y->tensor());
  EXPECT_UNCHANGED(y);
  EXPECT_GUARDS(y);
}

TEST_P(Conformance, AddLoraRejectsBadSegmentsBeforeWritingAnyRow) {
  const int64_t n = 6, k = 8, m = 5;
  auto x = input({n, k});
  auto y = input({n, m});
  auto a = input({4, k});
  auto b = input({m, 4});
  const Backend::LoraSegment ok{.first_row = 0, .rows = 1, .a = a->ptr(), .b = b->ptr()};
  // Each bad segment comes after a good one: a backend that wrote segment by segment would
  // have written row 0.
  const auto expect_refused = [&](const Backend::LoraSegment& bad, const std::string& what) {
    const Backend::LoraSegment segments[] = {ok, bad};
    EXPECT_THROW(backend_->add_lora(x->tensor(), segments, y->tensor()), Error) << what;
    EXPECT_UNCHANGED(y) << what;
  };
  const auto segment = [&](int64_t first_row, int64_t rows, const GuardedBuffer& sa,
                           const GuardedBuffer& sb) {
    return Backend::LoraSegment{.first_row = first_row, .rows = rows, .a = sa.ptr(), .b = sb.ptr()};
  };
  expect_refused(segment(0, 2, *a, *b), "overlaps the first segment");
  expect_refused(segment(5, 2, *a, *b), "runs past the last row");
  expect_refused(segment(6, 1, *a, *b), "starts past the last row");
  expect_refused(segment(-1, 2, *a, *b), "starts before row 0");
  expect_refused(segment(2, 0, *a, *b), "has no rows");
  expect_refused({.first_row = 2, .rows = 1, .a = a->ptr(), .b = nullptr}, "has no b");
  {
    const Backend::LoraSegment unordered[] = {segment(3, 2, *a, *b), ok};
    EXPECT_THROW(backend_->add_lora(x->tensor(), unordered, y->tensor()), Error);
    EXPECT_UNCHANGED(y);
  }
  auto a_rank0 = buffer({0, k});
  auto b_rank0 = buffer({m, 0});
  expect_refused(segment(2, 1, *a_rank0, *b_rank0), "rank 0");
  auto a_too_wide = input({Backend::kMaxLoraRank + 1, k});
  auto b_too_wide = input({m, Backend::kMaxLoraRank + 1});
  expect_refused(segment(2, 1, *a_too_wide, *b_too_wide), "rank past kMaxLoraRank");
  auto a_wrong_k = input({4, k - 1});
  expect_refused(segment(2, 1, *a_wrong_k, *b), "a's k is not x's");
  auto b_wrong_m = input({m + 1, 4});
  expect_refused(segment(2, 1, *a, *b_wrong_m), "b's m is not y's");
  auto b_wrong_rank = input({m, 3});
  expect_refused(segment(2, 1, *a, *b_wrong_rank), "b's rank is not a's");
  auto a_bf16 = input(DType::BF16, {4, k});
  expect_refused(segment(2, 1, *a_bf16, *b), "a is bf16");
  auto b_f16 = input(DType::F16, {m, 4});
  expect_refused(segment(2, 1, *a, *b_f16), "b is f16");
  const Backend::LoraSegment one[] = {ok};
  auto x_bf16 = input(DType::BF16, {n, k});
  EXPECT_THROW(backend_->add_lora(x_bf16->tensor(), one, y->tensor()), Error);
  auto y_bf16 = input(DType::BF16, {n, m});
  EXPECT_THROW(backend_->add_lora(x->tensor(), one, y_bf16->tensor()), Error);
  EXPECT_UNCHANGED(y_bf16);
  auto y_short = input({n - 1, m});
  EXPECT_THROW(backend_->add_lora(x->tensor(), one, y_short->tensor()), Error);
  EXPECT_UNCHANGED(y_short);
  // y over x, and y over an adapter's a (a [8, 8] holds the 30 floats of a [6, 5] y).
  const Tensor y_over_x(x->tensor().data, DType::F32, {n, m});
  EXPECT_THROW(backend_->add_lora(x->tensor(), one, y_over_x), Error);
  auto a_wide = input({8, k});
  auto b_wide = input({m, 8});
  const Backend::LoraSegment y_over_a[] = {segment(0, 1, *a_wide, *b_wide)};
  const Tensor y_in_a(a_wide->tensor().data, DType::F32, {n, m});
  EXPECT_THROW(backend_->add_lora(x->tensor(), y_over_a, y_in_a), Error);
  EXPECT_UNCHANGED(x);
  EXPECT_UNCHANGED(a_wide);
  EXPECT_UNCHANGED(y);
  EXPECT_GUARDS(y);
}

// ---------------------------------------------------------------- norms

TEST_P(Conformance, RmsNormMatchesReference) {
  for (const DType wdtype : {DType::F32, DType::BF16}) {
    for (const int64_t d : {1, 7, 64, 80, 4099}) {
      for (const int64_t rows : {1, 5}) {
        SCOPED_TRACE(dtype_label(wdtype) + " d=" + std::to_string(d) + " rows=" + std::to_string(rows));
        auto x = input(DType::F32, {rows, d}, 0.05f, 4.0f);
        auto weight = input(wdtype, {d}, 0.5f, 2.0f);
        auto y = output({rows, d});
        backend_->rms_norm(x->tensor(), weight->tensor(), 1e-5f, y->tensor());
        EXPECT_TRUE(
            close_to_reference(y->values(), reference::rms_norm(x->tensor(), weight->tensor(), 1e-5f), kF32));
        EXPECT_GUARDS(y);
        EXPECT_UNCHANGED(x);
      }
    }
  }
}

TEST_P(Conformance, LayerNormMatchesReferenceWithLargeMean) {
  for (const int64_t d : {1, 7, 64, 768, 1001}) {
    for (const int64_t rows : {1, 3}) {
      SCOPED_TRACE("d=" + std::to_string(d) + " rows=" + std::to_string(rows));
      auto x = input(DType::F32, {rows, d});
      for (int64_t i = 0; i < x->numel(); ++i) x->set(i, x->get(i) + 3.0f);  // mean far from 0
      x->snapshot();
      auto weight = input(DType::F32, {d}, 0.5f, 2.0f);
      auto bias = input(DType::BF16, {d});
      auto y = output({rows, d});
      backend_->layer_norm(x->tensor(), weight->tensor(), bias->tensor(), 1e-5f, y->tensor());
      EXPECT_TRUE(close_to_reference(
          y->values(), reference::layer_norm(x->tensor(), weight->tensor(), bias->tensor(), 1e-5f), kF32));
      EXPECT_GUARDS(y);
      EXPECT_UNCHANGED(x);
    }
  }
}

TEST_P(Conformance, NormsWorkInPlace) {
  auto x = input(DType::F32, {3, 50});
  const auto want_rms = reference::rms_norm(x->tensor(), x->tensor().slice_rows(0, 1).reshaped({50}), 1e-6f);
  auto weight = buffer(DType::F32, {50});
  for (int64_t i = 0; i < 50; ++i) weight->set(i, x->get(i));
  backend_->rms_norm(x->tensor(), weight->tensor(), 1e-6f, x->tensor());
  EXPECT_TRUE(close_to_reference(x->values(), want_rms, kF32));

  auto z = input(DType::F32, {2, 33});
  auto w = input(DType::F32, {33});
  auto b = input(DType::F32, {33});
  const auto want_ln = reference::layer_norm(z->tensor(), w->tensor(), b->tensor(), 1e-5f);
  backend_->layer_norm(z->tensor(), w->tensor(), b->tensor(), 1e-5f, z->tensor());
  EXPECT_TRUE(close_to_reference(z->values(), want_ln, kF32));
}

TEST_P(Conformance, NormsRejectMismatchedShapes) {
  auto x = input(DType::F32, {2, 16});
  auto w = input(DType::F32, {15});
  auto w_ok = input(DType::F32, {16});
  auto y = output({2, 16});
  auto y_wrong = output({4, 8});
  EXPECT_THROW(backend_->rms_norm(x->tensor(), w->tensor(), 1e-5f, y->tensor()), Error);
  EXPECT_THROW(backend_->rms_norm(x->tensor(), w_ok->tensor(), 1e-5f, y_wrong->tensor()), Error);
  EXPECT_THROW(backend_->layer_norm(x->tensor(), w_ok->tensor(), w->tensor(), 1e-5f, y->tensor()), Error);
  // An output shifted by one element into its input.
  auto big = input(DType::F32, {3, 16});
  const Tensor shifted(big->tensor().as<float>() + 1, DType::F32, {2, 16});
  EXPECT_THROW(backend_->rms_norm(big->tensor().slice_rows(0, 2), w_ok->tensor(), 1e-5f, shifted), Error);
}

// The fused residual norms against add() then the norm, bit for bit, and against the
// reference of the norm of the sums.
TEST_P(Conformance, AddNormsGiveAddThenNorm) {
  set_thread_count(4);  // several CPU chunks (37 rows of 4099), whatever the machine's cores
  for (const bool layer : {false, true}) {
    for (const int64_t d : {1, 7, 64, 4099}) {
      for (const int64_t rows : {1, 37}) {
        SCOPED_TRACE(std::string(layer ? "layer" : "rms") + " d=" + std::to_string(d) +
                     " rows=" + std::to_string(rows));
        auto a = input({rows, d}, 0.05f, 4.0f);
        auto b = input({rows, d});
        auto weight = input(DType::BF16, {d}, 0.5f, 2.0f);
        auto bias = input({d});
        const auto norm = [&](const Tensor& x, const Tensor& y) {
          if (layer) return backend_->layer_norm(x, weight->tensor(), bias->tensor(), 1e-5f, y);
          backend_->rms_norm(x, weight->tensor(), 1e-5f, y);
        };
        const auto add_norm = [&](const Tensor& x, const Tensor& delta, const Tensor& sum, const Tensor& y) {
          if (layer)
            return backend_->add_layer_norm(x, delta, sum, weight->tensor(), bias->tensor(), 1e-5f, y);
          backend_->add_rms_norm(x, delta, sum, weight->tensor(), 1e-5f, y);
        };
        auto want_sum = output({rows, d});
        auto want_y = output({rows, d});
        backend_->add(a->tensor(), b->tensor(), want_sum->tensor());
        norm(want_sum->tensor(), want_y->tensor());

        auto sum = output({rows, d});
        auto y = output({rows, d});
        add_norm(a->tensor(), b->tensor(), sum->tensor(), y->tensor());
        EXPECT_EQ(sum->values(), want_sum->values());
        EXPECT_EQ(y->values(), want_y->values());
        const auto want = layer
                              ? reference::layer_norm(sum->tensor(), weight->tensor(), bias->tensor(), 1e-5f)
                              : reference::rms_norm(sum->tensor(), weight->tensor(), 1e-5f);
        EXPECT_TRUE(close_to_reference(y->values(), want, kF32));
        EXPECT_GUARDS(sum);
        EXPECT_GUARDS(y);
        EXPECT_UNCHANGED(a);
        EXPECT_UNCHANGED(b);

        // In place, as the model runs it: x += delta (sum is a), or sum is b.
        auto in_place_y = output({rows, d});
        add_norm(a->tensor(), b->tensor(), a->tensor(), in_place_y->tensor());
        EXPECT_EQ(a->values(), want_sum->values());
        EXPECT_EQ(in_place_y->values(), want_y->values());
        auto c = input({rows, d}, 0.05f, 4.0f);
        auto delta = buffer({rows, d});
        for (int64_t i = 0; i < delta->numel(); ++i) delta->set(i, b->get(i));
        backend_->add(c->tensor(), delta->tensor(), want_sum->tensor());
        norm(want_sum->tensor(), want_y->tensor());
        add_norm(c->tensor(), delta->tensor(), delta->tensor(), in_place_y->tensor());
        EXPECT_EQ(delta->values(), want_sum->values());
        EXPECT_EQ(in_place_y->values(), want_y->values());
      }
    }
  }
}

TEST_P(Conformance, AddNormsRejectBadArguments) {
  auto a = input({2, 16});
  auto b = input({2, 16});
  auto w = input({16});
  auto w_short = input({15});
  auto sum = output({2, 16});
  auto y = output({2, 16});
  auto sum_short = output({2, 15});
  auto y_wrong = output({4, 8});
  const float eps = 1e-5f;
  EXPECT_THROW(
      backend_->add_rms_norm(a->tensor(), b->tensor(), sum->tensor(), w_short->tensor(), eps, y->tensor()),
      Error);
  EXPECT_THROW(
      backend_->add_rms_norm(a->tensor(), b->tensor(), sum_short->tensor(), w->tensor(), eps, y->tensor()),
      Error);
  EXPECT_THROW(
      backend_->add_rms_norm(a->tensor(), b->tensor(), sum->tensor(), w->tensor(), eps, y_wrong->tensor()),
      Error);
  EXPECT_THROW(backend_->add_layer_norm(a->tensor(), b->tensor(), sum->tensor(), w->tensor(),
                                        w_short->tensor(), eps, y->tensor()),
               Error);
  // y may not be any input, nor the sum: the residual stream must survive the norm.
  EXPECT_THROW(
      backend_->add_rms_norm(a->tensor(), b->tensor(), sum->tensor(), w->tensor(), eps, sum->tensor()),
      Error);
  EXPECT_THROW(backend_->add_rms_norm(a->tensor(), b->tensor(), a->tensor(), w->tensor(), eps, a->tensor()),
               Error);
  EXPECT_THROW(backend_->add_layer_norm(a->tensor(), b->tensor(), sum->tensor(), w->tensor(), w->tensor(),
                                        eps, b->tensor()),
               Error);
  // A sum shifted by one element into a.
  auto big = input({3, 16});
  const Tensor shifted(big->tensor().as<float>() + 1, DType::F32, {2, 16});
  EXPECT_THROW(backend_->add_rms_norm(big->tensor().slice_rows(0, 2), b->tensor(), shifted, w->tensor(), eps,
                                      y->tensor()),
               Error);
  for (const float v : y->values()) ASSERT_TRUE(std::isnan(v)) << "a refused call wrote y";
  for (const float v : sum->values()) ASSERT_TRUE(std::isnan(v)) << "a refused call wrote sum";
  EXPECT_UNCHANGED(a);
  EXPECT_UNCHANGED(b);
}

// ---------------------------------------------------------------- activations

const int64_t kElementCounts[] = {1, 7, 16, 33, 1000, 70001};

TEST_P(Conformance, GeluBothFormsMatchReference) {
  for (const GeluForm form : {GeluForm::Tanh, GeluForm::Erf}) {
    for (const int64_t count : kElementCounts) {
      SCOPED_TRACE(std::string(form == GeluForm::Tanh ? "tanh" : "erf") + " count=" + std::to_string(count));
      auto x = input(DType::F32, {count}, 0.01f, 8.0f);
      auto y = output({count});
      backend_->gelu(x->tensor(), form, y->tensor());
      EXPECT_TRUE(close_to_reference(y->values(), reference::gelu(x->tensor(), form), kF32));
      EXPECT_GUARDS(y);
      EXPECT_UNCHANGED(x);
    }
  }
}

TEST_P(Conformance, GeluIsAccurateForSmallAndLargeArguments) {
  // Relative error per element matters where |x| is tiny (the output is ~x/2) and the tail
  // must reach exactly x and 0.
  auto x = buffer(DType::F32, {8});
  const float values[] = {1e-6f, -1e-6f, 1e-3f, -3.0f, 12.0f, -12.0f, 100.0f, -100.0f};
  for (int i = 0; i < 8; ++i) x->set(i, values[i]);
  for (const GeluForm form : {GeluForm::Tanh, GeluForm::Erf}) {
    auto y = output({8});
    backend_->gelu(x->tensor(), form, y->tensor());
    const auto got = y->values();
    const auto want = reference::gelu(x->tensor(), form);
    for (size_t i = 0; i < 8; ++i)
      EXPECT_NEAR(got[i], want[i], 1e-6 * std::abs(values[i]) + 1e-30) << values[i];
  }
}

TEST_P(Conformance, SiluMatchesReference) {
  for (const int64_t count : kElementCounts) {
    SCOPED_TRACE("count=" + std::to_string(count));
    auto x = input(DType::F32, {count}, 0.01f, 12.0f);
    auto y = output({count});
    backend_->silu(x->tensor(), y->tensor());
    EXPECT_TRUE(close_to_reference(y->values(), reference::silu(x->tensor()), kF32));
    EXPECT_GUARDS(y);
    EXPECT_UNCHANGED(x);
  }
}

TEST_P(Conformance, SwigluAndAddMatchReference) {
  for (const int64_t count : kElementCounts) {
    SCOPED_TRACE("count=" + std::to_string(count));
    auto gate = input(DType::F32, {count}, 0.01f, 8.0f);
    auto up = input(DType::F32, {count});
    auto y = output({count});
    backend_->swiglu(gate->tensor(), up->tensor(), y->tensor());
    EXPECT_TRUE(close_to_reference(y->values(), reference::swiglu(gate->tensor(), up->tensor()), kF32));
    EXPECT_GUARDS(y);
    auto sum = output({count});
    backend_->add(gate->tensor(), up->tensor(), sum->tensor());
    EXPECT_TRUE(close_to_reference(sum->values(), reference::add(gate->tensor(), up->tensor()), kF32));
    EXPECT_GUARDS(sum);
    EXPECT_UNCHANGED(gate);
    EXPECT_UNCHANGED(up);
  }
}

TEST_P(Conformance, GegluScaleAndSoftcapMatchReference) {
  for (const int64_t count : kElementCounts) {
    SCOPED_TRACE("count=" + std::to_string(count));
    auto gate = input(DType::F32, {count}, 0.01f, 8.0f);
    auto up = input(DType::F32, {count});
    auto y = output({count});
    backend_->geglu(gate->tensor(), up->tensor(), y->tensor());
    EXPECT_TRUE(close_to_reference(y->values(), reference::geglu(gate->tensor(), up->tensor()), kF32));
    EXPECT_GUARDS(y);
    auto scaled = output({count});
    backend_->scale(gate->tensor(), 25.25f, scaled->tensor());
    EXPECT_TRUE(close_to_reference(scaled->values(), reference::scale(gate->tensor(), 25.25f), kF32));
    EXPECT_GUARDS(scaled);
    // Inputs up to 8 against caps of 0.5 (saturated) and 30 (Gemma 2's logits: nearly linear).
    for (const float cap : {0.5f, 30.0f}) {
      auto capped = output({count});
      backend_->softcap(gate->tensor(), cap, capped->tensor());
      EXPECT_TRUE(close_to_reference(capped->values(), reference::softcap(gate->tensor(), cap), kF32)) << cap;
      EXPECT_GUARDS(capped);
    }
    EXPECT_UNCHANGED(gate);
    EXPECT_UNCHANGED(up);
  }
}

// gpt-oss's clamped SwiGLU: inputs across both clamps (gate above the limit, up beyond it on
// either side), at gpt-oss's alpha and limit and at others.
TEST_P(Conformance, ClampedSwigluMatchesReference) {
  for (const int64_t count : kElementCounts) {
    SCOPED_TRACE("count=" + std::to_string(count));
    auto gate = input(DType::F32, {count}, -12.0f, 12.0f);
    auto up = input(DType::F32, {count}, -12.0f, 12.0f);
    for (const auto& [alpha, limit] :
         {std::pair{1.702f, 7.0f}, std::pair{-0.5f, 0.25f}, std::pair{3.0f, 100.0f}}) {
      auto y = output({count});
      backend_->clamped_swiglu(gate->tensor(), up->tensor(), alpha, limit, y->tensor());
      EXPECT_TRUE(close_to_reference(
          y->values(), reference::clamped_swiglu(gate->tensor(), up->tensor(), alpha, limit), kF32))
          << alpha << " " << limit;
      EXPECT_GUARDS(y);
    }
    EXPECT_UNCHANGED(gate);
    EXPECT_UNCHANGED(up);
  }
  auto a = input(DType::F32, {4, 37}, -10.0f, 10.0f);
  auto b = input(DType::F32, {4, 37}, -10.0f, 10.0f);
  const std::vector<double> want = reference::clamped_swiglu(a->tensor(), b->tensor(), 1.702f, 7.0f);
  backend_->clamped_swiglu(a->tensor(), b->tensor(), 1.702f, 7.0f, b->tensor());  // y aliases up
  EXPECT_TRUE(close_to_reference(b->values(), want, kF32));
  auto c = input(DType::F32, {11});
  auto y = output({4, 37});
  EXPECT_THROW(backend_->clamped_swiglu(a->tensor(), c->tensor(), 1.702f, 7.0f, y->tensor()), Error);
  EXPECT_THROW(backend_->clamped_swiglu(a->tensor(), a->tensor(), 1.702f, 0.0f, y->tensor()), Error);
  EXPECT_THROW(backend_->clamped_swiglu(a->tensor(), a->tensor(), NAN, 7.0f, y->tensor()), Error);
  EXPECT_THROW(backend_->clamped_swiglu(a->tensor(), a->tensor(), 1.0f, INFINITY, y->tensor()), Error);
  EXPECT_GUARDS(y);
}

TEST_P(Conformance, ElementwiseOpsWorkInPlace) {
  auto a = input(DType::F32, {4, 37});
  auto b = input(DType::F32, {4, 37});
  auto want = reference::add(a->tensor(), b->tensor());
  backend_->add(a->tensor(), b->tensor(), a->tensor());  // y aliases a
  EXPECT_TRUE(close_to_reference(a->values(), want, kF32));
  want = reference::add(a->tensor(), b->tensor());
  backend_->add(a->tensor(), b->tensor(), b->tensor());  // y aliases b
  EXPECT_TRUE(close_to_reference(b->values(), want, kF32));
  want = reference::swiglu(a->tensor(), b->tensor());
  backend_->swiglu(a->tensor(), b->tensor(), a->tensor());
  EXPECT_TRUE(close_to_reference(a->values(), want, kF32));
  want = reference::gelu(b->tensor(), GeluForm::Tanh);
  backend_->gelu(b->tensor(), GeluForm::Tanh, b->tensor());
  EXPECT_TRUE(close_to_reference(b->values(), want, kF32));
  want = reference::silu(b->tensor());
  backend_->silu(b->tensor(), b->tensor());
  EXPECT_TRUE(close_to_reference(b->values(), want, kF32));
  want = reference::geglu(a->tensor(), b->tensor());
  backend_->geglu(a->tensor(), b->tensor(), b->tensor());  // y aliases up
  EXPECT_TRUE(close_to_reference(b->values(), want, kF32));
  want = reference::scale(b->tensor(), -3.5f);
  backend_->scale(b->tensor(), -3.5f, b->tensor());
  EXPECT_TRUE(close_to_reference(b->values(), want, kF32));
  want = reference::softcap(b->tensor(), 2.0f);
  backend_->softcap(b->tensor(), 2.0f, b->tensor());
  EXPECT_TRUE(close_to_reference(b->values(), want, kF32));
  want = reference::softmax(b->tensor());
  backend_->softmax(b->tensor(), b->tensor());
  EXPECT_TRUE(close_to_reference(b->values(), want, kF32));
}

TEST_P(Conformance, ElementwiseOpsRejectMismatchedSizes) {
  auto a = input(DType::F32, {10});
  auto b = input(DType::F32, {11});
  auto y = output({10});
  EXPECT_THROW(backend_->add(a->tensor(), b->tensor(), y->tensor()), Error);
  EXPECT_THROW(backend_->swiglu(a->tensor(), b->tensor(), y->tensor()), Error);
  EXPECT_THROW(backend_->silu(b->tensor(), y->tensor()), Error);
  EXPECT_THROW(backend_->geglu(a->tensor(), b->tensor(), y->tensor()), Error);
  EXPECT_THROW(backend_->scale(b->tensor(), 2.0f, y->tensor()), Error);
  EXPECT_THROW(backend_->softcap(b->tensor(), 2.0f, y->tensor()), Error);
  EXPECT_THROW(backend_->softcap(a->tensor(), 0.0f, a->tensor()), Error);
  EXPECT_THROW(backend_->softcap(a->tensor(), -1.0f, a->tensor()), Error);
  EXPECT_THROW(backend_->gelu(b->tensor(), GeluForm::Erf, y->tensor()), Error);
  EXPECT_THROW(backend_->softmax(b->tensor(), y->tensor()), Error);
  auto half = input(DType::BF16, {10});
  EXPECT_THROW(backend_->add(a->tensor(), half->tensor(), y->tensor()), Error);
  EXPECT_GUARDS(y);
}

// ---------------------------------------------------------------- softmax

TEST_P(Conformance, SoftmaxMatchesReference) {
  for (const int64_t d : {1, 5, 16, 33, 1000}) {
    for (const int64_t rows : {1, 6}) {
      SCOPED_TRACE("d=" + std::to_string(d) + " rows=" + std::to_string(rows));
      auto x = input(DType::F32, {rows, d}, 0.01f, 20.0f);
      auto y = output({rows, d});
      backend_->softmax(x->tensor(), y->tensor());
      EXPECT_TRUE(close_to_reference(y->values(), reference::softmax(x->tensor()), kF32));
      EXPECT_GUARDS(y);
      EXPECT_UNCHANGED(x);
    }
  }
}

// ---------------------------------------------------------------- convert

TEST_P(Conformance, ConvertRoundsToNearestEven) {
  for (const DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    for (const int64_t n : {1, 17, 100000}) {
      SCOPED_TRACE(dtype_label(dtype) + " n=" + std::to_string(n));
      auto x = input(DType::F32, {n}, 1e-3f, 70000.0f);  // f16 overflows to inf above 65520
      auto y = buffer(dtype, {n});
      backend_->convert(x->tensor(), y->tensor());
      std::vector<float> want(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        uint32_t bits = 0;
        store_from_f32(&bits, dtype, 0, x->get(i));
        want[static_cast<size_t>(i)] = load_as_f32(&bits, dtype, 0);
      }
      const std::vector<float> got = y->values();  // after the backend's work completes
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << "element " << i;
      EXPECT_GUARDS(y);
      EXPECT_UNCHANGED(x);
    }
  }
}

// ---------------------------------------------------------------- rope

struct RopeCase {
  int64_t n, heads, head_dim, rotary_dim;
};

TEST_P(Conformance, RopeBothLayoutsMatchReference) {
  const RopeCase cases[] = {{1, 4, 16, 16}, {3, 2, 64, 64}, {7, 3, 80, 32}, {2, 4, 128, 128}, {5, 2, 64, 16}};
  // Magnitude 1 (plain RoPE) and LongRoPE's attention factor of Phi-4-mini (32x longer context).
  for (const auto& [layout, magnitude] :
       {std::pair{RopeLayout::Neox, 1.0f}, std::pair{RopeLayout::Interleaved, 1.0f},
        std::pair{RopeLayout::Neox, 1.1902f}}) {
    for (const RopeCase& c : cases) {
      SCOPED_TRACE(std::string(layout == RopeLayout::Neox ? "neox" : "interleaved") +
                   " n=" + std::to_string(c.n) + " head_dim=" + std::to_string(c.head_dim) +
                   " rotary=" + std::to_string(c.rotary_dim) + " magnitude=" + std::to_string(magnitude));
      auto x = input(DType::F32, {c.n, c.heads, c.head_dim});
      auto freq = buffer(DType::F32, {c.rotary_dim / 2}, 4);
      for (int64_t j = 0; j < c.rotary_dim / 2; ++j)
        freq->set(j, static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(j) / c.rotary_dim)));
      std::vector<int32_t> positions(static_cast<size_t>(c.n));
      std::uniform_int_distribution<int32_t> pos(0, 8191);
      for (auto& p : positions) p = pos(rng_);
      const auto want = reference::rope(x->tensor(), positions, freq->tensor(), layout, magnitude);
      backend_->rope(x->tensor(), positions, freq->tensor(), layout, magnitude);
      EXPECT_TRUE(close_to_reference(x->values(), want, kF32));
      EXPECT_GUARDS(x);
    }
  }
}

TEST_P(Conformance, RopeRejectsBadShapes) {
  auto x = input(DType::F32, {2, 2, 8});
  auto freq = input(DType::F32, {5});  // rotates 10 > 8
  auto freq_ok = input(DType::F32, {4});
  const std::vector<int32_t> two = {0, 1}, one = {0};
  EXPECT_THROW(backend_->rope(x->tensor(), two, freq->tensor(), RopeLayout::Neox, 1.0f), Error);
  EXPECT_THROW(backend_->rope(x->tensor(), one, freq_ok->tensor(), RopeLayout::Neox, 1.0f), Error);
  EXPECT_THROW(backend_->rope(x->tensor().reshaped({2, 16}), two, freq_ok->tensor(), RopeLayout::Neox, 1.0f),
               Error);
  for (const float magnitude :
       {0.0f, -1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()})
    EXPECT_THROW(backend_->rope(x->tensor(), two, freq_ok->tensor(), RopeLayout::Neox, magnitude), Error);
}

// ---------------------------------------------------------------- attention

struct AttentionCase {
  int64_t head_dim, heads, kv_heads, n, first_pos;
};

// Cache rows at and after first_pos + n hold NaN: reading them would poison the output.
void poison_unused_cache_rows(GuardedBuffer& cache, int64_t filled, int64_t row_elems) {
  for (int64_t i = filled * row_elems; i < cache.numel(); ++i) cache.set(i, NAN);
  cache.snapshot();
}

TEST_P(Conformance, AttentionMatchesReference) {
  const AttentionCase cases[] = {
      {16, 4, 1, 1, 0},
      {64, 4, 2, 1, 37},
      {80, 8, 8, 3, 5},
      {128, 4, 4, 37, 0},
      {64, 4, 2, 5, 100},
      {16, 4, 1, 9, 3},
      {80, 8, 8, 1, 200},
      {64, 8, 8, 2, 0},
      {128, 4, 1, 4, 61},
      {20, 2, 1, 6, 2},
      // Groups of 8, 3 and 5 query heads per kv head, whole or split across work items.
      {64, 8, 1, 9, 10},
      {32, 6, 2, 3, 7},
      {16, 5, 1, 2, 50},
      {64, 8, 1, 1, 33},
      // Several blocks of tokens (AMX: of 64), lengths past a tile of 32 positions.
      {64, 9, 3, 150, 20},
      // Rows the CUDA backend cuts into 2-4 and 32 position splits (attention_splits.h).
      {64, 4, 2, 3, 1500},
      {32, 2, 1, 1, 20000},
  };
  // Work is split by thread count: run single-threaded too.
  for (const int threads : {0, 1}) {
    set_thread_count(threads);
    for (const DType cache_dtype : {DType::F32, DType::BF16, DType::F16}) {
      for (const AttentionCase& c : cases) {
        SCOPED_TRACE(dtype_label(cache_dtype) + " threads=" + std::to_string(threads) +
                     " head_dim=" + std::to_string(c.head_dim) + " heads=" + std::to_string(c.heads) + "/" +
                     std::to_string(c.kv_heads) + " n=" + std::to_string(c.n) +
                     " first_pos=" + std::to_string(c.first_pos));
        const int64_t capacity = c.first_pos + c.n + 3;
        auto q = input(DType::F32, {c.n, c.heads, c.head_dim}, 0.05f, 2.0f);
        auto k = input(cache_dtype, {capacity, c.kv_heads, c.head_dim});
        auto v = input(cache_dtype, {capacity, c.kv_heads, c.head_dim});
        poison_unused_cache_rows(*k, c.first_pos + c.n, c.kv_heads * c.head_dim);
        poison_unused_cache_rows(*v, c.first_pos + c.n, c.kv_heads * c.head_dim);
        auto out = output({c.n, c.heads, c.head_dim});
        const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
        backend_->attention(q->tensor(), k->tensor(), v->tensor(), c.first_pos, scale, out->tensor());
        EXPECT_TRUE(close_to_reference(
            out->values(), reference::attention(q->tensor(), k->tensor(), v->tensor(), c.first_pos, scale),
            cache_dtype == DType::F16 ? kF16Probabilities : kF32));
        EXPECT_GUARDS(out);
        EXPECT_UNCHANGED(q);
        EXPECT_UNCHANGED(k);
        EXPECT_UNCHANGED(v);
      }
    }
  }
  set_thread_count(0);
}

// Sliding windows (Mistral, Gemma), soft-capped scores (Gemma 2) and attention sinks (gpt-oss):
// windows of one position, shorter and longer than the rows of a prefill, and a decode step
// long enough that the CPU splits its positions among threads; the positions no query of the
// call sees hold 10^4 in k and v, which would swamp any output that took them in. Sinks from
// far below the scores to far above them (then a row's probabilities sum to almost 0). Each
// token of a prefill gets the bits of a decode step at its position, as without a window (the
// CPU kernels' promise). On the CUDA backend these take the row-wise kernel, whatever
// TOKENMILL_CUDA_ATTENTION says.
TEST_P(Conformance, AttentionWithAWindowOrASoftcapMatchesReference) {
  struct Case {
    int64_t head_dim, heads, kv_heads, n, first_pos, window;
    float softcap;
    bool sinks = false;
  };
  const Case cases[] = {{16, 4, 1, 9, 3, 1, 0.0f},          {64, 4, 2, 37, 0, 5, 0.0f},
                        {64, 9, 3, 150, 20, 64, 0.0f},      {32, 6, 2, 3, 100, 16, 0.0f},
                        {64, 8, 2, 1, 3000, 1024, 0.0f},    {80, 4, 4, 7, 10, 0, 5.0f},
                        {64, 4, 1, 21, 70, 40, 2.0f},       {64, 8, 2, 1, 2500, 0, 30.0f},
                        {64, 8, 2, 37, 0, 0, 0.0f, true},   {64, 8, 2, 1, 3000, 128, 0.0f, true},
                        {64, 4, 4, 21, 70, 16, 0.0f, true}, {32, 6, 1, 5, 2500, 0, 0.0f, true}};
  for (const DType cache_dtype : {DType::F32, DType::F16}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(dtype_label(cache_dtype) + " head_dim=" + std::to_string(c.head_dim) + " heads=" +
                   std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " n=" + std::to_string(c.n) +
                   " first_pos=" + std::to_string(c.first_pos) + " window=" + std::to_string(c.window) +
                   " softcap=" + std::to_string(c.softcap) + (c.sinks ? " sinks" : ""));
      const int64_t capacity = c.first_pos + c.n, row = c.kv_heads * c.head_dim, width = c.heads * c.head_dim;
      AttentionScores scores(1.0f / std::sqrt(static_cast<float>(c.head_dim)), c.window, c.softcap);
      auto sinks = input(DType::F32, {c.heads});
      for (int64_t h = 0; h < c.heads; ++h)
        sinks->set(h, -8.0f + 16.0f * static_cast<float>(h) / static_cast<float>(c.heads));
      sinks->snapshot();
      if (c.sinks) scores.sinks = &sinks->tensor();
      auto q = input(DType::F32, {c.n, c.heads, c.head_dim}, 0.05f, 4.0f);
      auto k = input(cache_dtype, {capacity, c.kv_heads, c.head_dim});
      auto v = input(cache_dtype, {capacity, c.kv_heads, c.head_dim});
      auto out = output({c.n, c.heads, c.head_dim});
      for (int64_t i = 0; i < scores.first_position(c.first_pos) * row; ++i) {
        k->set(i, 1e4f);
        v->set(i, 1e4f);
      }
      k->snapshot();
      v->snapshot();
      const std::vector<double> want =
          reference::attention(q->tensor(), k->tensor(), v->tensor(), c.first_pos, scores);
      backend_->attention(q->tensor(), k->tensor(), v->tensor(), c.first_pos, scores, out->tensor());
      EXPECT_TRUE(
          close_to_reference(out->values(), want, cache_dtype == DType::F16 ? kF16Probabilities : kF32));
      EXPECT_GUARDS(out);
      EXPECT_UNCHANGED(k);
      EXPECT_UNCHANGED(v);
      if (c.n == 1 || GetParam().name.rfind("cpu", 0) != 0) continue;
      const std::vector<float> prefill = out->values();
      for (int64_t t = 0; t < c.n; ++t) {
        const std::vector<float> step = attention_of_tokens(*q, *k, *v, c.first_pos, t, 1, scores);
        ASSERT_EQ(bits_of(step),
                  bits_of(std::vector<float>(prefill.begin() + t * width, prefill.begin() + (t + 1) * width)))
            << "token " << t;
      }
    }
  }
}

// The CPU kernels' promise (KernelTable::attention): a row's output does not depend on the
// call, so each token of a prefill (its keys staged transposed) gets the bits of a decode
// step at its position (one token: the cache read directly). Head dims below, at and past
// a vector, GQA groups, row counts that leave short passes, lengths that end mid-four. The
// one exception: AMX takes calls of two or more tokens over an f16 cache (head_dim a
// multiple of 32) to the tiles, which sum in another order. There each token of a prefill
// gets the bits of a two-token call ending at it (or starting, for the first), and a decode
// step's values within tolerance; and some token's bits differ (the tiles did run).
TEST_P(Conformance, AttentionGivesEachTokenTheBitsOfADecodeStep) {
  if (GetParam().name.rfind("cpu", 0) != 0) GTEST_SKIP() << "a promise of the CPU kernels";
  const AttentionCase cases[] = {{64, 9, 3, 37, 5}, {80, 4, 2, 19, 0},  {128, 4, 1, 21, 70},
                                 {16, 4, 1, 9, 3},  {20, 2, 1, 6, 2},   {8, 2, 2, 5, 0},
                                 {64, 3, 3, 70, 1}, {32, 6, 2, 17, 64}, {64, 9, 3, 150, 20}};
  for (const DType cache_dtype : {DType::F32, DType::BF16, DType::F16}) {
    const bool tiles = GetParam().name == "cpu_amx" && cache_dtype == DType::F16;
    for (const AttentionCase& c : cases) {
      SCOPED_TRACE(dtype_label(cache_dtype) + " head_dim=" + std::to_string(c.head_dim) +
                   " heads=" + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) +
                   " n=" + std::to_string(c.n) + " first_pos=" + std::to_string(c.first_pos));
      const int64_t capacity = c.first_pos + c.n, width = c.heads * c.head_dim;
      auto q = input(DType::F32, {c.n, c.heads, c.head_dim}, 0.05f, 2.0f);
      auto k = input(cache_dtype, {capacity, c.kv_heads, c.head_dim});
      auto v = input(cache_dtype, {capacity, c.kv_heads, c.head_dim});
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
      const std::vector<float> prefill = attention_of_tokens(*q, *k, *v, c.first_pos, 0, c.n, scale);
      int64_t tokens_unlike_steps = 0;
      for (int64_t t = 0; t < c.n; ++t) {
        const std::vector<float> token(prefill.begin() + t * width, prefill.begin() + (t + 1) * width);
        const std::vector<float> step = attention_of_tokens(*q, *k, *v, c.first_pos, t, 1, scale);
        if (!tiles) {
          ASSERT_EQ(bits_of(step), bits_of(token)) << "token " << t;
          continue;
        }
        ASSERT_TRUE(
            close_to_reference(step, std::vector<double>(token.begin(), token.end()), kF16Probabilities))
            << "token " << t;
        if (bits_of(step) != bits_of(token)) ++tokens_unlike_steps;
        const int64_t first = t > 0 ? t - 1 : 0;
        const std::vector<float> pair = attention_of_tokens(*q, *k, *v, c.first_pos, first, 2, scale);
        const auto row = pair.begin() + (t - first) * width;
        ASSERT_EQ(bits_of(std::vector<float>(row, row + width)), bits_of(token)) << "token " << t;
      }
      if (tiles && c.head_dim % 32 == 0) {
        EXPECT_GT(tokens_unlike_steps, 0);
      }
    }
  }
}

// A decode step's work items are one kv head's query heads, whole or cut into slices when
// there are few kv heads; a thread runs its consecutive slices of one kv head in one call.
// From 2048 positions the threads split the positions instead, in segments (cpu_attention.cpp).
// Whatever the thread count, and so wherever a thread's items start and end inside a kv
// head's group or the context, every head's output gets the bits of the single-threaded step.
TEST_P(Conformance, AttentionDecodeIsBitwiseIndependentOfThreadCount) {
  if (GetParam().name.rfind("cpu", 0) != 0) GTEST_SKIP() << "the CPU backend's thread split";
  const AttentionCase cases[] = {{64, 9, 3, 1, 300}, {64, 14, 2, 1, 700}, {32, 21, 3, 1, 1000},
                                 {64, 8, 1, 1, 500}, {64, 9, 3, 1, 2500}, {20, 6, 2, 1, 2047}};
  for (const DType cache_dtype : {DType::F32, DType::BF16, DType::F16}) {
    for (const AttentionCase& c : cases) {
      SCOPED_TRACE(dtype_label(cache_dtype) + " heads=" + std::to_string(c.heads) + "/" +
                   std::to_string(c.kv_heads) + " first_pos=" + std::to_string(c.first_pos));
      auto q = input(DType::F32, {1, c.heads, c.head_dim}, 0.05f, 2.0f);
      auto k = input(cache_dtype, {c.first_pos + 1, c.kv_heads, c.head_dim});
      auto v = input(cache_dtype, {c.first_pos + 1, c.kv_heads, c.head_dim});
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
      set_thread_count(1);
      const std::vector<float> alone = attention_of_tokens(*q, *k, *v, c.first_pos, 0, 1, scale);
      for (const int threads : {2, 3, 4}) {
        set_thread_count(threads);
        EXPECT_EQ(bits_of(attention_of_tokens(*q, *k, *v, c.first_pos, 0, 1, scale)), bits_of(alone))
            << threads << " threads";
      }
    }
  }
  set_thread_count(0);
}

// Sums with no rounding error come out the same whatever their order, so inputs that make
// every sum of an f16 cache's attention exact give the tiles (a prefill, on AMX) and a
// decode step (one token) the same bits: this checks that the tiles take every part of
// every product. 9-bit values in [256, 511] 2^-9 (a bf16 keeps 8: the odd ones have a low
// part) and scale 1/8 make the scores exact; both paths' softmax is the same arithmetic on
// them, so they give the same probabilities.
TEST_P(Conformance, AttentionOfExactSumsGivesPrefillAndDecodeTheSameBits) {
  if (GetParam().name.rfind("cpu", 0) != 0) GTEST_SKIP() << "a promise of the CPU kernels";
  const int64_t hd = 64, heads = 4, kv_heads = 2, width = heads * hd;
  std::uniform_int_distribution<int> nine_bits(256, 511);
  const auto nine_bit_value = [&](bool negative) {
    return std::ldexp(static_cast<float>(negative ? -nine_bits(rng_) : nine_bits(rng_)), -9);
  };
  // n tokens whose q, k and v elements (index i) are q_at(i), k_at(i), v_at(i): each decode
  // step against the prefill.
  const auto expect_steps_equal_prefill = [&](int64_t n, auto q_at, auto k_at, auto v_at) {
    auto q = buffer(DType::F32, {n, heads, hd});
    auto k = buffer(DType::F16, {n, kv_heads, hd});
    auto v = buffer(DType::F16, {n, kv_heads, hd});
    for (int64_t i = 0; i < q->numel(); ++i) q->set(i, q_at(i));
    for (int64_t i = 0; i < k->numel(); ++i) k->set(i, k_at(i));
    for (int64_t i = 0; i < v->numel(); ++i) v->set(i, v_at(i));
    const std::vector<float> prefill = attention_of_tokens(*q, *k, *v, 0, 0, n, 0.125f);
    for (int64_t t = 0; t < n; ++t) {
      const std::vector<float> step = attention_of_tokens(*q, *k, *v, 0, t, 1, 0.125f);
      ASSERT_EQ(bits_of(step),
                bits_of(std::vector<float>(prefill.begin() + t * width, prefill.begin() + (t + 1) * width)))
          << "token " << t;
    }
  };
  const auto positive = [&](int64_t) { return nine_bit_value(false); };
  {
    SCOPED_TRACE(
        "scores: positive q and k (each score is 64 products of at most 2^18 units of 2^-18); "
        "value row p the unit vector of dim p, so each output is a probability");
    expect_steps_equal_prefill(40, positive, positive,
                               [&](int64_t i) { return i % hd == i / (kv_heads * hd) ? 1.0f : 0.0f; });
  }
  {
    SCOPED_TRACE(
        "outputs: zero keys, so each of a row's len probabilities is f16(1 / len) (11 bits); "
        "signed values (len <= 16 products of at most 2^20 units)");
    expect_steps_equal_prefill(
        16, positive, [](int64_t) { return 0.0f; }, [&](int64_t i) { return nine_bit_value(i % 3 == 0); });
  }
}

// A value that overflowed f16 (inf) reaches only the rows that attend to it: the tiles would
// multiply it by the zero probabilities of the earlier tokens, so AMX leaves the calls of its
// kv head to the AVX-512 kernel. Earlier tokens stay finite, their heads over that kv head
// with a decode step's bits.
TEST_P(Conformance, AttentionKeepsAnInfiniteValueFromEarlierTokens) {
  if (GetParam().name.rfind("cpu", 0) != 0) GTEST_SKIP() << "a promise of the CPU kernels";
  const int64_t n = 40, heads = 4, kv_heads = 2, hd = 64, width = heads * hd;
  const int64_t first_kv_head_width = heads / kv_heads * hd;  // its query heads come first
  auto q = input(DType::F32, {n, heads, hd});
  auto k = input(DType::F16, {n, kv_heads, hd});
  auto v = input(DType::F16, {n, kv_heads, hd});
  v->set((n - 1) * kv_heads * hd + 5, INFINITY);  // the last token's, kv head 0
  const float scale = 0.125f;
  const std::vector<float> prefill = attention_of_tokens(*q, *k, *v, 0, 0, n, scale);
  for (int64_t t = 0; t + 1 < n; ++t) {
    const auto token = prefill.begin() + t * width;
    ASSERT_TRUE(std::all_of(token, token + width, [](float x) { return std::isfinite(x); })) << "token " << t;
    const std::vector<float> step = attention_of_tokens(*q, *k, *v, 0, t, 1, scale);
    ASSERT_EQ(bits_of(std::vector<float>(token, token + first_kv_head_width)),
              bits_of(std::vector<float>(step.begin(), step.begin() + first_kv_head_width)))
        << "token " << t;
  }
}

TEST_P(Conformance, AttentionAcceptsAFlatOutput) {
  auto q = input(DType::F32, {2, 4, 16});
  auto k = input(DType::F32, {8, 2, 16});
  auto v = input(DType::F32, {8, 2, 16});
  auto out = output({2, 64});
  backend_->attention(q->tensor(), k->tensor(), v->tensor(), 3, 0.25f, out->tensor());
  EXPECT_TRUE(close_to_reference(
      out->values(), reference::attention(q->tensor(), k->tensor(), v->tensor(), 3, 0.25f), kF32));
}

TEST_P(Conformance, AttentionRejectsBadShapes) {
  auto q = input(DType::F32, {2, 4, 16});
  auto k = input(DType::F32, {8, 3, 16});  // 4 heads cannot share 3 kv heads
  auto k_ok = input(DType::F32, {8, 2, 16});
  auto v_ok = input(DType::F32, {8, 2, 16});
  auto k_dim = input(DType::F32, {8, 2, 8});
  auto out = output({2, 4, 16});
  auto out_small = output({2, 4, 8});
  EXPECT_THROW(backend_->attention(q->tensor(), k->tensor(), k->tensor(), 0, 1.0f, out->tensor()), Error);
  EXPECT_THROW(backend_->attention(q->tensor(), k_ok->tensor(), v_ok->tensor(), 7, 1.0f, out->tensor()),
               Error);
  EXPECT_THROW(backend_->attention(q->tensor(), k_ok->tensor(), v_ok->tensor(), -1, 1.0f, out->tensor()),
               Error);
  EXPECT_THROW(backend_->attention(q->tensor(), k_dim->tensor(), k_dim->tensor(), 0, 1.0f, out->tensor()),
               Error);
  EXPECT_THROW(backend_->attention(q->tensor(), k_ok->tensor(), k_dim->tensor(), 0, 1.0f, out->tensor()),
               Error);
  EXPECT_THROW(backend_->attention(q->tensor(), k_ok->tensor(), v_ok->tensor(), 0, 1.0f, out_small->tensor()),
               Error);
  EXPECT_THROW(backend_->attention(q->tensor(), k_ok->tensor(), v_ok->tensor(), 0, 1.0f, q->tensor()), Error);
  // Sinks: one f32 per query head.
  auto sinks_short = input(DType::F32, {3});
  auto sinks_bf16 = input(DType::BF16, {4});
  for (const GuardedBuffer* sinks : {sinks_short.get(), sinks_bf16.get()}) {
    AttentionScores scores(1.0f);
    scores.sinks = &sinks->tensor();
    EXPECT_THROW(backend_->attention(q->tensor(), k_ok->tensor(), v_ok->tensor(), 0, scores, out->tensor()),
                 Error);
  }
  EXPECT_GUARDS(out);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, Conformance, ::testing::ValuesIn(attention_backends_under_test()),
                         backend_test_name);

}  // namespace
}  // namespace tokenmill::testing
