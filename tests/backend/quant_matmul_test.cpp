// Quantized weights on every backend: matmul against quant::vec_dot_row (the scalar
// reference of ggml's integer arithmetic), batch invariance, the activation quantisers
// against quant::quantize_row, and embedding rows against quant::dequantize_row.
//
// Tolerances. The integer block sums must be exact and only the f32 summation order may
// differ from the reference, so two kinds of data are used:
//  - "exact" data: every scale a power of two and levels small, so every partial sum is an
//    exactly representable f32 whatever the order: results must equal the reference bit
//    for bit (any wrong integer product shows up as a mismatch).
//  - realistic data (random floats quantized by the reference quantisers): max |got - ref|
//    <= kQuantF32 * max |ref| over the output (f32 sums of at most a few hundred block terms
//    in a different order).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/quant_kernels.h"
#include "conformance_harness.h"
#include "core/error.h"
#include "core/parallel.h"
#include "quant/quant_formats.h"
#include "quant/quant_reference.h"

namespace tokenmill::testing {
namespace {

constexpr double kQuantF32 = 1e-5;

const DType kWeightTypes[] = {DType::Q4_0,  DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                              DType::MXFP4, DType::Q4_K, DType::Q5_K, DType::Q6_K};

std::string label(DType t) { return std::string(dtype_name(t)); }
bool is_kquant(DType t) { return dtype_block_size(t) == 256; }

// The weight rows' k values: several blocks, and (k-quants) several super-blocks.
std::vector<int64_t> ks_for(DType t) {
  return is_kquant(t) ? std::vector<int64_t>{256, 768} : std::vector<int64_t>{32, 96, 576};
}

// Random floats of magnitude [lo, hi] and random sign.
std::vector<float> random_floats(std::mt19937_64& rng, size_t count, float lo = 0.05f, float hi = 1.0f) {
  std::uniform_real_distribution<float> magnitude(lo, hi);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> v(count);
  for (float& f : v) f = negative(rng) ? -magnitude(rng) : magnitude(rng);
  return v;
}

// Activations whose Q8 levels are in {-1, 0, 1} except one +-127 per 32 values, all
// scaled by 1/8: every activation scale is exactly 1/8 and the levels are x * 8.
std::vector<float> exact_activations(std::mt19937_64& rng, int64_t n, int64_t k) {
  std::uniform_int_distribution<int> level(-1, 1), pos(0, 31);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> x(static_cast<size_t>(n * k));
  for (size_t b = 0; b < x.size(); b += 32) {
    for (size_t j = 0; j < 32; ++j) x[b + j] = static_cast<float>(level(rng)) / 8;
    x[b + static_cast<size_t>(pos(rng))] = (negative(rng) ? -127.0f : 127.0f) / 8;
  }
  return x;
}

// f16 bits of +-2^-4.
constexpr uint16_t kSixteenth = 0x2c00, kMinusSixteenth = 0xac00;

// Byte offsets of a block's f16 scale fields (d, and m / dmin where the type has one).
std::vector<size_t> scale_offsets(DType t) {
  switch (t) {
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K: return {0, 2};
    case DType::Q6_K: return {208};
    default: return {0};
  }
}

// MXFP4's scale bytes e (2^(e - 128), always positive): 2^-5 .. 2^-3 by default.
struct E8m0Range {
  int min = 123, max = 125;
};

// Weight rows of random bits (every level, sub-scale and high bit possible) whose scales are
// +-2^-4 (f16) or 2^(e - 128) for e in `e8m0_range` (MXFP4): with exact_activations, all
// arithmetic is exact.
std::vector<uint8_t> exact_weights(std::mt19937_64& rng, DType t, int64_t m, int64_t k,
                                   E8m0Range e8m0_range = {}) {
  std::vector<uint8_t> w(dtype_row_bytes(t, k) * static_cast<size_t>(m));
  std::uniform_int_distribution<int> byte(0, 255), e8m0(e8m0_range.min, e8m0_range.max);
  for (uint8_t& b : w) b = static_cast<uint8_t>(byte(rng));
  std::bernoulli_distribution negative(0.5);
  const size_t block = dtype_block_bytes(t);
  for (size_t b = 0; b < w.size(); b += block) {
    if (t == DType::MXFP4) {
      w[b] = static_cast<uint8_t>(e8m0(rng));
      continue;
    }
    for (const size_t offset : scale_offsets(t)) {
      const uint16_t h = negative(rng) ? kMinusSixteenth : kSixteenth;
      std::memcpy(&w[b + offset], &h, 2);
    }
  }
  return w;
}

// Weight rows quantized from random floats by the reference quantiser.
std::vector<uint8_t> realistic_weights(std::mt19937_64& rng, DType t, int64_t m, int64_t k) {
  const std::vector<float> f = random_floats(rng, static_cast<size_t>(m * k), 0.0f, 1.0f);
  std::vector<uint8_t> w(dtype_row_bytes(t, k) * static_cast<size_t>(m));
  for (int64_t r = 0; r < m; ++r)
    quant::quantize_row(t, f.data() + r * k, w.data() + static_cast<size_t>(r) * dtype_row_bytes(t, k), k);
  return w;
}

// y[t, r] = vec_dot_row(w row r, quantize_row(x row t)) + bias[r], as the backend contract says.
std::vector<float> reference_matmul(DType t, const std::vector<uint8_t>& w, const std::vector<float>& x,
                                    const float* bias, int64_t n, int64_t k, int64_t m) {
  const DType act = quant::activation_type(t);
  std::vector<uint8_t> a(dtype_row_bytes(act, k));
  std::vector<float> y(static_cast<size_t>(n * m));
  for (int64_t i = 0; i < n; ++i) {
    quant::quantize_row(act, x.data() + i * k, a.data(), k);
    for (int64_t r = 0; r < m; ++r)
      y[static_cast<size_t>(i * m + r)] =
          quant::vec_dot_row(t, w.data() + static_cast<size_t>(r) * dtype_row_bytes(t, k), a.data(), k) +
          (bias != nullptr ? bias[r] : 0.0f);
  }
  return y;
}

class QuantMatmul : public ::testing::TestWithParam<BackendUnderTest> {
 protected:
  void SetUp() override { backend_ = GetParam().make(); }

  // The backend's y for weights `w` (placed 3 bytes past an alignment boundary) and x.
  std::vector<float> run(DType t, const std::vector<uint8_t>& w, const std::vector<float>& x,
                         const std::vector<float>* bias, int64_t n, int64_t k, int64_t m) {
    GuardedBuffer wb(GetParam(), t, {m, k}, 3);
    std::memcpy(wb.tensor().data, w.data(), w.size());
    wb.snapshot();
    GuardedBuffer xb(GetParam(), DType::F32, {n, k}, 4);
    std::memcpy(xb.tensor().data, x.data(), x.size() * sizeof(float));
    xb.snapshot();
    GuardedBuffer bb(GetParam(), DType::F32, {m});
    if (bias != nullptr) std::memcpy(bb.tensor().data, bias->data(), bias->size() * sizeof(float));
    GuardedBuffer yb(GetParam(), DType::F32, {n, m});
    yb.fill(NAN);
    backend_->matmul(xb.tensor(), wb.tensor(), bias != nullptr ? bb.ptr() : nullptr, yb.tensor());
    EXPECT_TRUE(yb.guards_intact()) << "y canaries overwritten";
    EXPECT_TRUE(wb.guards_intact() && wb.unchanged_since_snapshot()) << "w was modified";
    EXPECT_TRUE(xb.unchanged_since_snapshot()) << "x was modified";
    return yb.values();
  }

  std::unique_ptr<Backend> backend_;
  std::mt19937_64 rng_{20250117};
};

const int64_t kTokenCounts[] = {1, 2, 3, 5, 17, 64};
const int64_t kRowCounts[] = {1, 7, 37};

TEST_P(QuantMatmul, ExactDataMatchesReferenceBitForBit) {
  for (const DType t : kWeightTypes)
    for (const int64_t k : ks_for(t))
      for (const int64_t m : kRowCounts)
        for (const int64_t n : kTokenCounts) {
          const bool with_bias = (n + m) % 2 == 0;
          SCOPED_TRACE(label(t) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                       " m=" + std::to_string(m) + (with_bias ? " +bias" : ""));
          const std::vector<uint8_t> w = exact_weights(rng_, t, m, k);
          const std::vector<float> x = exact_activations(rng_, n, k);
          const std::vector<float> bias = random_floats(rng_, static_cast<size_t>(m));
          const std::vector<float>* b = with_bias ? &bias : nullptr;
          const std::vector<float> want =
              reference_matmul(t, w, x, with_bias ? bias.data() : nullptr, n, k, m);
          ASSERT_EQ(run(t, w, x, b, n, k, m), want);
        }
}

// MXFP4 scales at the bottom of the e8m0 range (e = 0, 1: f32 subnormals 2^-128, 2^-127;
// e = 2: 2^-126), which the kernels decode apart from the others: products of 2^-131 and
// up, still exact.
TEST_P(QuantMatmul, Mxfp4SubnormalScalesMatchReferenceBitForBit) {
  const int64_t k = 96, m = 37;
  for (const int64_t n : {int64_t{1}, int64_t{3}, int64_t{17}}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<uint8_t> w = exact_weights(rng_, DType::MXFP4, m, k, {0, 2});
    const std::vector<float> x = exact_activations(rng_, n, k);
    const std::vector<float> want = reference_matmul(DType::MXFP4, w, x, nullptr, n, k, m);
    ASSERT_EQ(run(DType::MXFP4, w, x, nullptr, n, k, m), want);
  }
}

TEST_P(QuantMatmul, RealisticDataMatchesReference) {
  for (const DType t : kWeightTypes)
    for (const int64_t k : ks_for(t))
      for (const int64_t n : {int64_t{1}, int64_t{5}, int64_t{17}})
        for (const bool with_bias : {false, true}) {
          const int64_t m = 37;
          SCOPED_TRACE(label(t) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                       (with_bias ? " +bias" : ""));
          const std::vector<uint8_t> w = realistic_weights(rng_, t, m, k);
          const std::vector<float> x = random_floats(rng_, static_cast<size_t>(n * k));
          const std::vector<float> bias = random_floats(rng_, static_cast<size_t>(m));
          const std::vector<float> want =
              reference_matmul(t, w, x, with_bias ? bias.data() : nullptr, n, k, m);
          EXPECT_TRUE(close_to_reference(run(t, w, x, with_bias ? &bias : nullptr, n, k, m),
                                         std::vector<double>(want.begin(), want.end()), kQuantF32));
        }
}

// A token's outputs are the same bits whatever batch it runs in and however threads split
// the rows: every token of a 64-token batch against a 1-token, a 5-token (token first) and a
// 3-token (token last) batch, on 1 thread and on all.
TEST_P(QuantMatmul, ResultsAreBatchAndThreadInvariant) {
  for (const DType t : kWeightTypes) {
    SCOPED_TRACE(label(t));
    const int64_t k = is_kquant(t) ? 512 : 320, m = 203, n = 64;
    const std::vector<uint8_t> w = realistic_weights(rng_, t, m, k);
    const std::vector<float> x = random_floats(rng_, static_cast<size_t>(n * k));
    const std::vector<float> bias = random_floats(rng_, static_cast<size_t>(m));
    const std::vector<float> full = run(t, w, x, &bias, n, k, m);
    const auto rows = [&](int64_t first, int64_t count) {
      return std::vector<float>(x.begin() + first * k, x.begin() + (first + count) * k);
    };
    const auto outputs = [&](const std::vector<float>& y, int64_t token) {
      return std::vector<float>(y.begin() + token * m, y.begin() + (token + 1) * m);
    };
    for (int threads : {1, 0}) {
      set_thread_count(threads);
      for (const int64_t token :
           {int64_t{0}, int64_t{1}, int64_t{6}, int64_t{37}, int64_t{59}, int64_t{63}}) {
        SCOPED_TRACE("token " + std::to_string(token) + " threads " + std::to_string(threads));
        EXPECT_EQ(outputs(run(t, w, rows(token, 1), &bias, 1, k, m), 0), outputs(full, token));
        if (token + 5 <= n) {
          EXPECT_EQ(outputs(run(t, w, rows(token, 5), &bias, 5, k, m), 0), outputs(full, token));
        }
        if (token >= 2) {
          EXPECT_EQ(outputs(run(t, w, rows(token - 2, 3), &bias, 3, k, m), 2), outputs(full, token));
        }
      }
    }
    set_thread_count(0);
  }
}

// matmul_shared over quantized targets gives each target matmul()'s bits: targets sharing an
// activation format (Q4_K and Q6_K: Q8_K), alternating formats (Q8_0, Q8_1; MXFP4 takes
// Q8_0), plain and quantized weights mixed, with and without biases.
TEST_P(QuantMatmul, MatmulSharedGivesEachTargetMatmulsBits) {
  const std::vector<std::vector<DType>> dtype_sets = {{DType::Q4_K, DType::Q6_K, DType::Q4_K},
                                                      {DType::Q8_0, DType::Q4_1, DType::Q5_0, DType::Q5_1},
                                                      {DType::F32, DType::Q8_0, DType::BF16, DType::Q4_0},
                                                      {DType::MXFP4, DType::Q4_1, DType::Q8_0}};
  const int64_t rows_of[] = {7, 70, 33, 96};
  for (const std::vector<DType>& dtypes : dtype_sets) {
    for (const int64_t n : {int64_t{1}, int64_t{3}, int64_t{37}}) {
      const int64_t k = 512;
      SCOPED_TRACE(label(dtypes[0]) + " first, n=" + std::to_string(n));
      const std::vector<float> x = random_floats(rng_, static_cast<size_t>(n * k));
      GuardedBuffer xb(GetParam(), DType::F32, {n, k});
      std::memcpy(xb.tensor().data, x.data(), x.size() * sizeof(float));
      std::vector<std::unique_ptr<GuardedBuffer>> w, bias, y;
      std::vector<std::vector<float>> expected;
      std::vector<Backend::MatmulTarget> targets;
      for (size_t i = 0; i < dtypes.size(); ++i) {
        const int64_t m = rows_of[i];
        const std::vector<uint8_t> bytes = realistic_weights(rng_, dtypes[i], m, k);
        w.push_back(
            std::make_unique<GuardedBuffer>(GetParam(), dtypes[i], std::initializer_list<int64_t>{m, k}, 3));
        std::memcpy(w.back()->tensor().data, bytes.data(), bytes.size());
        const std::vector<float> b = random_floats(rng_, static_cast<size_t>(m));
        bias.push_back(
            std::make_unique<GuardedBuffer>(GetParam(), DType::F32, std::initializer_list<int64_t>{m}));
        std::memcpy(bias.back()->tensor().data, b.data(), b.size() * sizeof(float));
        const std::vector<float>* target_bias = i == 1 ? nullptr : &b;
        expected.push_back(run(dtypes[i], bytes, x, target_bias, n, k, m));
        y.push_back(
            std::make_unique<GuardedBuffer>(GetParam(), DType::F32, std::initializer_list<int64_t>{n, m}));
        y.back()->fill(NAN);
        targets.push_back({w.back()->ptr(), i == 1 ? nullptr : bias.back()->ptr(), y.back()->ptr()});
      }
      backend_->matmul_shared(xb.tensor(), targets);
      for (size_t i = 0; i < dtypes.size(); ++i) {
        EXPECT_EQ(y[i]->values(), expected[i]) << "target " << i;
        EXPECT_TRUE(y[i]->guards_intact()) << "target " << i;
      }
    }
  }
}

// matmul_many gives each product matmul()'s bits: a mixture of experts' decode steps (each
// product its own x of 1 to 3 tokens, quantized weights of one type or of several, gpt-oss's
// MXFP4 experts, plain weights, rows that are not a multiple of 8), a prefill among decode
// steps, a biased product.
TEST_P(QuantMatmul, MatmulManyGivesEachProductMatmulsBits) {
  struct Case {
    std::vector<DType> dtypes;
    std::vector<int64_t> tokens;
    bool bias_on_second = false;
  };
  const std::vector<Case> cases = {{{DType::Q4_0, DType::Q4_0, DType::Q4_0, DType::Q4_0}, {1, 1, 1, 1}},
                                   {{DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::Q4_1}, {2, 1, 3, 1}},
                                   {{DType::F32, DType::BF16, DType::F16}, {1, 4, 2}},
                                   {{DType::Q5_0, DType::Q5_1}, {1, 37}},
                                   {{DType::Q4_K, DType::Q4_K}, {1, 1}, true},
                                   {{DType::MXFP4, DType::MXFP4, DType::MXFP4, DType::MXFP4}, {1, 2, 1, 3}}};
  const int64_t rows_of[] = {7, 70, 33, 96};
  for (const Case& c : cases) {
    const int64_t k = 512;
    SCOPED_TRACE(label(c.dtypes[0]) + " first, " + std::to_string(c.dtypes.size()) + " products");
    std::vector<std::unique_ptr<GuardedBuffer>> x, w, bias, y;
    std::vector<std::vector<float>> expected;
    std::vector<Backend::MatmulProduct> products;
    for (size_t i = 0; i < c.dtypes.size(); ++i) {
      const int64_t n = c.tokens[i], m = rows_of[i];
      const std::vector<float> xs = random_floats(rng_, static_cast<size_t>(n * k));
      x.push_back(
          std::make_unique<GuardedBuffer>(GetParam(), DType::F32, std::initializer_list<int64_t>{n, k}));
      std::memcpy(x.back()->tensor().data, xs.data(), xs.size() * sizeof(float));
      const std::vector<uint8_t> bytes = realistic_weights(rng_, c.dtypes[i], m, k);
      w.push_back(
          std::make_unique<GuardedBuffer>(GetParam(), c.dtypes[i], std::initializer_list<int64_t>{m, k}, 3));
      std::memcpy(w.back()->tensor().data, bytes.data(), bytes.size());
      const std::vector<float> b = random_floats(rng_, static_cast<size_t>(m));
      bias.push_back(
          std::make_unique<GuardedBuffer>(GetParam(), DType::F32, std::initializer_list<int64_t>{m}));
      std::memcpy(bias.back()->tensor().data, b.data(), b.size() * sizeof(float));
      const bool biased = c.bias_on_second && i == 1;
      expected.push_back(run(c.dtypes[i], bytes, xs, biased ? &b : nullptr, n, k, m));
      y.push_back(
          std::make_unique<GuardedBuffer>(GetParam(), DType::F32, std::initializer_list<int64_t>{n, m}));
      y.back()->fill(NAN);
      products.push_back(
          {x.back()->ptr(), w.back()->ptr(), biased ? bias.back()->ptr() : nullptr, y.back()->ptr()});
    }
    backend_->matmul_many(products);
    for (size_t i = 0; i < products.size(); ++i) {
      EXPECT_EQ(y[i]->values(), expected[i]) << "product " << i;
      EXPECT_TRUE(y[i]->guards_intact()) << "product " << i;
    }
    // Two products writing one y are refused.
    const Backend::MatmulProduct overlapping[] = {products[0], products[0]};
    EXPECT_THROW(backend_->matmul_many(overlapping), Error);
  }
}

TEST_P(QuantMatmul, RejectsActivationFormatsAsWeights) {
  for (const DType t : {DType::Q8_1, DType::Q8_K}) {
    const int64_t k = dtype_block_size(t);
    GuardedBuffer w(GetParam(), t, {3, k});
    std::memset(w.tensor().data, 0, w.tensor().nbytes());
    GuardedBuffer x(GetParam(), DType::F32, {1, k});
    x.fill(0.5f);
    GuardedBuffer y(GetParam(), DType::F32, {1, 3});
    EXPECT_THROW(backend_->matmul(x.tensor(), w.tensor(), nullptr, y.tensor()), Error) << label(t);
  }
}

TEST_P(QuantMatmul, EmbeddingDequantizesRowsExactly) {
  for (const DType t : kWeightTypes) {
    SCOPED_TRACE(label(t));
    const int64_t vocab = 11, d = is_kquant(t) ? 512 : 96;
    const std::vector<uint8_t> table = realistic_weights(rng_, t, vocab, d);
    GuardedBuffer tb(GetParam(), t, {vocab, d}, 1);
    std::memcpy(tb.tensor().data, table.data(), table.size());
    const std::vector<int32_t> ids = {0, 10, 3, 3, 7};
    GuardedBuffer out(GetParam(), DType::F32, {5, d});
    out.fill(NAN);
    backend_->embedding(tb.tensor(), ids, out.tensor());
    std::vector<float> want(static_cast<size_t>(5 * d));
    for (size_t i = 0; i < ids.size(); ++i)
      quant::dequantize_row(t, table.data() + static_cast<size_t>(ids[i]) * dtype_row_bytes(t, d),
                            want.data() + static_cast<int64_t>(i) * d, d);
    EXPECT_EQ(out.values(), want);
    EXPECT_TRUE(out.guards_intact());
  }
}

INSTANTIATE_TEST_SUITE_P(AllBackends, QuantMatmul, ::testing::ValuesIn(backends_under_test()),
                         [](const ::testing::TestParamInfo<BackendUnderTest>& param_info) {
                           return param_info.param.name;
                         });

// ---------------------------------------------------------------- activation quantisers

std::vector<const cpu::QuantKernelTable*> quant_tables() {
  std::vector<const cpu::QuantKernelTable*> tables = {&cpu::quant_kernels_avx2()};
  if (cpu_supports(CpuIsa::Avx512) && cpu_features().avx512vnni)
    tables.push_back(&cpu::quant_kernels_avx512_vnni());
  return tables;
}

// Rows that stress the rounding: exact .5 ties after scaling (roundf rounds them away from
// zero, Q8_K's nearest_int to even), zero blocks, equal magnitudes of both signs (the first
// one sets Q8_K's sign), tiny and huge magnitudes.
std::vector<std::vector<float>> quantiser_rows(std::mt19937_64& rng, int64_t k) {
  std::vector<std::vector<float>> rows;
  rows.push_back(random_floats(rng, static_cast<size_t>(k)));
  rows.push_back(random_floats(rng, static_cast<size_t>(k), 1e-30f, 1e-28f));
  rows.push_back(random_floats(rng, static_cast<size_t>(k), 1e20f, 1e30f));
  std::vector<float> ties(static_cast<size_t>(k));
  for (size_t i = 0; i < ties.size(); ++i) {
    // Per 32: 127 sets d = 1 (Q8_0) / iscale = -1 (Q8_K); the rest are k + 0.5 or integers.
    const int j = static_cast<int>(i % 32);
    ties[i] = j == 0 ? 127.0f : static_cast<float>((j % 5) - 2) + (j % 2 == 0 ? 0.5f : 0.0f);
  }
  rows.push_back(ties);
  std::vector<float> mixed = random_floats(rng, static_cast<size_t>(k));
  for (size_t i = 0; i < 64 && i < mixed.size(); ++i) mixed[i] = 0.0f;  // zero blocks
  for (size_t i = 64; i + 1 < mixed.size(); i += 97) {
    mixed[i] = -3.0f;  // equal magnitudes: the first (negative) one is Q8_K's max
    mixed[i + 1] = 3.0f;
  }
  rows.push_back(mixed);
  return rows;
}

TEST(QuantActivations, QuantisersWriteTheReferenceBytes) {
  std::mt19937_64 rng(7);
  for (const cpu::QuantKernelTable* table : quant_tables())
    for (const DType act : {DType::Q8_0, DType::Q8_1, DType::Q8_K})
      for (const int64_t k : {int64_t{256}, int64_t{768}, int64_t{2048}}) {
        SCOPED_TRACE(std::string(table->isa) + " " + label(act) + " k=" + std::to_string(k));
        for (const std::vector<float>& row : quantiser_rows(rng, k)) {
          std::vector<uint8_t> want(dtype_row_bytes(act, k)), got(want.size(), 0xa5);
          quant::quantize_row(act, row.data(), want.data(), k);
          table->quantize_row(act, row.data(), k, got.data());
          ASSERT_EQ(got, want);
        }
      }
}

}  // namespace
}  // namespace tokenmill::testing
