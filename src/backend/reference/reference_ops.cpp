#include "backend/reference/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

#include "core/error.h"

namespace tokenmill::reference {

namespace {

void expect_numel(const char* op, const Tensor& t, int64_t numel) {
  if (t.numel() != numel) fail("reference {}: {} should have {} elements", op, t.shape_string(), numel);
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Applies f to every element of x.
template <class F>
std::vector<double> map(const Tensor& x, F f) {
  std::vector<double> y(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) y[static_cast<size_t>(i)] = f(element(x, i));
  return y;
}

}  // namespace

double element(const Tensor& t, int64_t i) { return load_as_f32(t.data, t.dtype, static_cast<size_t>(i)); }

std::vector<double> embedding(const Tensor& table, std::span<const int32_t> ids) {
  const int64_t vocab = table.dim(0), d = table.dim(1);
  std::vector<double> out;
  for (const int32_t id : ids) {
    if (id < 0 || id >= vocab) fail("reference embedding: id {} outside [0, {})", id, vocab);
    for (int64_t j = 0; j < d; ++j) out.push_back(element(table, id * d + j));
  }
  return out;
}

std::vector<double> combine_rows(const Tensor& x, std::span<const int32_t> rows,
                                 std::span<const float> scales, int64_t n) {
  const int64_t m = x.dim(0), d = x.dim(1), k = static_cast<int64_t>(rows.size()) / n;
  std::vector<double> y(static_cast<size_t>(n * d), 0.0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = r * k; j < (r + 1) * k; ++j) {
      const int32_t row = rows[static_cast<size_t>(j)];
      if (row < 0 || row >= m) fail("reference combine_rows: row {} outside [0, {})", row, m);
      for (int64_t c = 0; c < d; ++c)
        y[static_cast<size_t>(r * d + c)] += scales[static_cast<size_t>(j)] * element(x, row * d + c);
    }
  return y;
}

std::vector<double> matmul(const Tensor& x, const Tensor& w, const Tensor* bias) {
  const int64_t m = w.dim(0), k = w.dim(1), n = x.rows();
  expect_numel("matmul", x, n * k);
  if (bias != nullptr) expect_numel("matmul", *bias, m);
  std::vector<double> y(static_cast<size_t>(n * m));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = 0; r < m; ++r) {
      double sum = bias != nullptr ? element(*bias, r) : 0.0;
      for (int64_t i = 0; i < k; ++i) sum += element(x, t * k + i) * element(w, r * k + i);
      y[static_cast<size_t>(t * m + r)] = sum;
    }
  }
  return y;
}

std::vector<double> add_lora(const Tensor& x, std::span<const Backend::LoraSegment> segments,
                             const Tensor& y_before) {
  const int64_t n = x.dim(0), k = x.dim(1), m = y_before.dim(1);
  expect_numel("add_lora", y_before, n * m);
  std::vector<double> y = map(y_before, [](double v) { return v; });
  for (const Backend::LoraSegment& s : segments) {
    const int64_t rank = s.a->dim(0);
    expect_numel("add_lora", *s.a, rank * k);
    expect_numel("add_lora", *s.b, m * rank);
    if (s.first_row < 0 || s.rows < 0 || s.first_row + s.rows > n)
      fail("reference add_lora: rows [{}, {}) outside [0, {})", s.first_row, s.first_row + s.rows, n);
    for (int64_t r = s.first_row; r < s.first_row + s.rows; ++r) {
      std::vector<double> t(static_cast<size_t>(rank), 0.0);  // x[r] . a^T
      for (int64_t j = 0; j < rank; ++j)
        for (int64_t i = 0; i < k; ++i)
          t[static_cast<size_t>(j)] += element(x, r * k + i) * element(*s.a, j * k + i);
      for (int64_t c = 0; c < m; ++c)
        for (int64_t j = 0; j < rank; ++j)
          y[static_cast<size_t>(r * m + c)] += element(*s.b, c * rank + j) * t[static_cast<size_t>(j)];
    }
  }
  return y;
}

std::vector<double> rms_norm(const Tensor& x, const Tensor& weight, float eps) {
  const int64_t rows = x.rows(), d = x.cols();
  expect_numel("rms_norm", weight, d);
  std::vector<double> y(static_cast<size_t>(rows * d));
  for (int64_t r = 0; r < rows; ++r) {
    double sum_sq = 0;
    for (int64_t i = 0; i < d; ++i) sum_sq += element(x, r * d + i) * element(x, r * d + i);
    const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(d) + static_cast<double>(eps));
    for (int64_t i = 0; i < d; ++i)
      y[static_cast<size_t>(r * d + i)] = element(x, r * d + i) * inv * element(weight, i);
  }
  return y;
}

std::vector<double> layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  const int64_t rows = x.rows(), d = x.cols();
  expect_numel("layer_norm", weight, d);
  expect_numel("layer_norm", bias, d);
  std::vector<double> y(static_cast<size_t>(rows * d));
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) mean += element(x, r * d + i);
    mean /= static_cast<double>(d);
    for (int64_t i = 0; i < d; ++i) var += (element(x, r * d + i) - mean) * (element(x, r * d + i) - mean);
    var /= static_cast<double>(d);
    const double inv = 1.0 / std::sqrt(var + static_cast<double>(eps));
    for (int64_t i = 0; i < d; ++i)
      y[static_cast<size_t>(r * d + i)] =
          (element(x, r * d + i) - mean) * inv * element(weight, i) + element(bias, i);
  }
  return y;
}

std::vector<double> gelu(const Tensor& x, GeluForm form) {
  if (form == GeluForm::Tanh) {
    const double c = std::sqrt(2.0 / std::numbers::pi);
    return map(x, [c](double v) { return 0.5 * v * (1.0 + std::tanh(c * (v + 0.044715 * v * v * v))); });
  }
  return map(x, [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::numbers::sqrt2)); });
}

std::vector<double> silu(const Tensor& x) {
  return map(x, [](double v) { return v * sigmoid(v); });
}

std::vector<double> swiglu(const Tensor& gate, const Tensor& up) {
  expect_numel("swiglu", up, gate.numel());
  std::vector<double> y = silu(gate);
  for (int64_t i = 0; i < gate.numel(); ++i) y[static_cast<size_t>(i)] *= element(up, i);
  return y;
}

std::vector<double> geglu(const Tensor& gate, const Tensor& up) {
  expect_numel("geglu", up, gate.numel());
  std::vector<double> y = gelu(gate, GeluForm::Tanh);
  for (int64_t i = 0; i < gate.numel(); ++i) y[static_cast<size_t>(i)] *= element(up, i);
  return y;
}

std::vector<double> clamped_swiglu(const Tensor& gate, const Tensor& up, float alpha, float limit) {
  expect_numel("clamped_swiglu", up, gate.numel());
  std::vector<double> y(static_cast<size_t>(gate.numel()));
  for (int64_t i = 0; i < gate.numel(); ++i) {
    const double g = std::min(element(gate, i), static_cast<double>(limit));
    const double u = std::clamp(element(up, i), -static_cast<double>(limit), static_cast<double>(limit));
    y[static_cast<size_t>(i)] = g * sigmoid(alpha * g) * (u + 1.0);
  }
  return y;
}

std::vector<double> scale(const Tensor& x, float factor) {
  return map(x, [factor](double v) { return static_cast<double>(factor) * v; });
}

std::vector<double> softcap(const Tensor& x, float cap) {
  return map(x, [cap](double v) { return cap * std::tanh(v / cap); });
}

std::vector<double> add(const Tensor& a, const Tensor& b) {
  expect_numel("add", b, a.numel());
  std::vector<double> y(static_cast<size_t>(a.numel()));
  for (int64_t i = 0; i < a.numel(); ++i) y[static_cast<size_t>(i)] = element(a, i) + element(b, i);
  return y;
}

std::vector<double> rope(const Tensor& x, std::span<const int32_t> positions, const Tensor& inv_freq,
                         RopeLayout layout, float magnitude) {
  const int64_t n = x.dim(0), heads = x.dim(1), hd = x.dim(2), half = inv_freq.numel();
  if (static_cast<int64_t>(positions.size()) != n || 2 * half > hd) fail("reference rope: bad shapes");
  std::vector<double> y = map(x, [](double v) { return v; });
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      double* v = y.data() + (t * heads + h) * hd;
      for (int64_t j = 0; j < half; ++j) {
        const double angle = positions[static_cast<size_t>(t)] * element(inv_freq, j);
        const int64_t i0 = layout == RopeLayout::Neox ? j : 2 * j;
        const int64_t i1 = layout == RopeLayout::Neox ? j + half : 2 * j + 1;
        const double a = v[i0], b = v[i1];
        v[i0] = magnitude * (a * std::cos(angle) - b * std::sin(angle));
        v[i1] = magnitude * (b * std::cos(angle) + a * std::sin(angle));
      }
    }
  }
  return y;
}

std::vector<double> attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                              int64_t first_pos, const AttentionScores& scoring) {
  const int64_t n = q.dim(0), heads = q.dim(1), hd = q.dim(2), kv_heads = k_cache.dim(1);
  if (kv_heads < 1 || heads % kv_heads != 0 || k_cache.dim(2) != hd || first_pos + n > k_cache.dim(0))
    fail("reference attention: bad shapes");
  const int64_t group = heads / kv_heads;
  // An f16 cache multiplies f16 by f16 (Backend::attention): q and the probabilities are
  // rounded to f16 before their products.
  const bool f16 = k_cache.dtype == DType::F16;
  const auto operand = [&](double x) {
    return f16 ? static_cast<double>(f16_to_f32(f32_to_f16(static_cast<float>(x)))) : x;
  };
  std::vector<double> out(static_cast<size_t>(n * heads * hd), 0.0);
  std::vector<double> scores;
  for (int64_t t = 0; t < n; ++t) {
    const int64_t len = first_pos + t + 1, first = scoring.first_position(first_pos + t);
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t g = h / group;
      scores.assign(static_cast<size_t>(len), 0.0);  // the positions before `first` keep 0
      double max_score = -INFINITY;
      for (int64_t p = first; p < len; ++p) {
        double dot = 0;
        for (int64_t i = 0; i < hd; ++i)
          dot +=
              operand(element(q, (t * heads + h) * hd + i)) * element(k_cache, (p * kv_heads + g) * hd + i);
        double score = static_cast<double>(scoring.scale) * dot;
        if (scoring.softcap > 0) score = scoring.softcap * std::tanh(score / scoring.softcap);
        scores[static_cast<size_t>(p)] = score;
        max_score = std::max(max_score, score);
      }
      const double sink = scoring.sinks != nullptr ? element(*scoring.sinks, h) : -INFINITY;
      max_score = std::max(max_score, sink);
      double sum = sink == -INFINITY ? 0.0 : std::exp(sink - max_score);
      for (int64_t p = first; p < len; ++p)
        sum += (scores[static_cast<size_t>(p)] = std::exp(scores[static_cast<size_t>(p)] - max_score));
      double* o = out.data() + (t * heads + h) * hd;
      for (int64_t p = first; p < len; ++p)
        for (int64_t i = 0; i < hd; ++i)
          o[i] +=
              operand(scores[static_cast<size_t>(p)] / sum) * element(v_cache, (p * kv_heads + g) * hd + i);
    }
  }
  return out;
}

namespace {

// Positions [0, len) of a pool [num_blocks, block_size, kv_heads, head_dim] read through a
// block table, as a contiguous cache [len, kv_heads, head_dim] in `storage`.
Tensor gather_positions(const Tensor& pool, std::span<const int32_t> blocks, int64_t len,
                        std::vector<unsigned char>& storage) {
  const int64_t block_size = pool.dim(1), kv_heads = pool.dim(2), hd = pool.dim(3);
  const size_t row_bytes = static_cast<size_t>(kv_heads * hd) * dtype_size(pool.dtype);
  storage.resize(static_cast<size_t>(len) * row_bytes);
  for (int64_t p = 0; p < len; ++p) {
    const auto b = static_cast<size_t>(p / block_size);
    if (b >= blocks.size() || blocks[b] < 0 || blocks[b] >= pool.dim(0))
      fail("reference paged_attention: no pool block for position {}", p);
    const int64_t slot = blocks[b] * block_size + p % block_size;
    std::memcpy(storage.data() + static_cast<size_t>(p) * row_bytes,
                static_cast<const unsigned char*>(pool.data) + static_cast<size_t>(slot) * row_bytes,
                row_bytes);
  }
  return Tensor(storage.data(), pool.dtype, {len, kv_heads, hd});
}

}  // namespace

std::vector<double> paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                                    const Backend::PagedSequence& sequence, const AttentionScores& scores) {
  if (k_pool.rank != 4 || k_pool.shape != v_pool.shape || k_pool.dtype != v_pool.dtype)
    fail("reference paged_attention: bad pools");
  const int64_t len = sequence.first_pos + sequence.rows;
  std::vector<unsigned char> k_storage, v_storage;
  const Tensor k_cache = gather_positions(k_pool, sequence.blocks, len, k_storage);
  const Tensor v_cache = gather_positions(v_pool, sequence.blocks, len, v_storage);
  return attention(q.slice_rows(sequence.first_row, sequence.rows), k_cache, v_cache, sequence.first_pos,
                   scores);
}

std::vector<double> store_kv(const Tensor& rows, std::span<const int64_t> slots, const Tensor& pool) {
  const int64_t width = pool.rank == 4 ? pool.dim(2) * pool.dim(3) : 0;
  const int64_t pool_slots = pool.numel() / std::max<int64_t>(width, 1);
  expect_numel("store_kv", rows, static_cast<int64_t>(slots.size()) * width);
  std::vector<double> out(static_cast<size_t>(pool.numel()));
  for (int64_t i = 0; i < pool.numel(); ++i) out[static_cast<size_t>(i)] = element(pool, i);
  for (size_t r = 0; r < slots.size(); ++r) {
    if (slots[r] < 0 || slots[r] >= pool_slots)
      fail("reference store_kv: slot {} outside the pool", slots[r]);
    for (int64_t e = 0; e < width; ++e) {
      const auto x = static_cast<float>(element(rows, static_cast<int64_t>(r) * width + e));
      out[static_cast<size_t>(slots[r] * width + e)] = pool.dtype == DType::BF16 ? bf16_to_f32(f32_to_bf16(x))
                                                       : pool.dtype == DType::F16 ? f16_to_f32(f32_to_f16(x))
                                                                                  : x;
    }
  }
  return out;
}

std::vector<double> softmax(const Tensor& x) {
  const int64_t rows = x.rows(), d = x.cols();
  std::vector<double> y(static_cast<size_t>(rows * d));
  for (int64_t r = 0; r < rows; ++r) {
    double max_value = -INFINITY, sum = 0;
    for (int64_t i = 0; i < d; ++i) max_value = std::max(max_value, element(x, r * d + i));
    for (int64_t i = 0; i < d; ++i)
      sum += (y[static_cast<size_t>(r * d + i)] = std::exp(element(x, r * d + i) - max_value));
    for (int64_t i = 0; i < d; ++i) y[static_cast<size_t>(r * d + i)] /= sum;
  }
  return y;
}

}  // namespace tokenmill::reference
