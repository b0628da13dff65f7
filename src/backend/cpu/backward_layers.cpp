// The CPU backward of the layer ops (norms, activations, RoPE, attention): plain loops the
// compiler vectorizes (except the activations' derivatives, SIMD kernels of the kernel table,
// and attention's dot products, AVX2 intrinsics), f32
// except the norms' rows, which are summed and combined in double (dx is a difference of
// nearly equal terms when a row has few elements). Every reduction across rows or heads
// runs in an order fixed by the shapes alone, so the bits never depend on the thread count.
#include "backend/cpu/cpu_backward.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <numbers>
#include <vector>

#include "backend/checks/attention_checks.h"
#include "backend/checks/layer_checks.h"
#include "backend/checks/shape_checks.h"
#include "backend/cpu/scratch.h"
#include "core/error.h"
#include "core/parallel.h"
#include "quant/quant_reference.h"

namespace tokenmill::cpu {

using namespace checks;  // NOLINT: the shared argument checks read as part of each op

namespace {

thread_local Scratch tl_weight;                     // caller: a norm weight converted to f32
thread_local Scratch tl_partials;                   // caller: per-row-block parameter gradients
thread_local Scratch tl_head_grads;                 // caller: attention dk, dv of each query head
thread_local Scratch tl_worker_probs;               // worker: attention probabilities of a query block
thread_local std::vector<double> tl_worker_angles;  // worker: RoPE cos/sin of one token

constexpr int64_t kMinElementwiseWork = 32 * 1024;  // elements per thread
// Rows per block of the norms' parameter-gradient partials: a constant, so the summation
// order of dweight and dbias is the same whatever the thread count.
constexpr int64_t kNormBlockRows = 32;

size_t at(int64_t i) { return static_cast<size_t>(i); }

// Items per chunk so that a chunk holds at least kMinElementwiseWork units.
int64_t grain(int64_t work_per_item) {
  return std::max<int64_t>(1, kMinElementwiseWork / std::max<int64_t>(1, work_per_item));
}

// ---------------------------------------------------------------- shape checks

// A norm weight [d] of any dtype (checked by check_norm_backward) as f32 (converted in
// tl_weight unless already f32).
const float* weight_as_f32(const Tensor& weight, int64_t d) {
  if (weight.dtype == DType::F32) return weight.as<const float>();
  float* f = tl_weight.floats(d);
  if (is_quantized(weight.dtype)) {
    quant::dequantize_row(weight.dtype, weight.data, f, d);
  } else {
    for (int64_t i = 0; i < d; ++i) f[i] = load_as_f32(weight.data, weight.dtype, at(i));
  }
  return f;
}

// ---------------------------------------------------------------- norms

// The skeleton of both norms' backward over rows [rows, d]: row_body(row, partials) writes
// dx of `row` and adds the row's parameter gradients to partials[c * d + i] for the
// param_grads.size() gradients c. Rows are summed per fixed block of kNormBlockRows, then
// the blocks in order, in double, are added to param_grads[c].
template <class RowBody>
void norm_rows(int64_t rows, int64_t d, std::initializer_list<float*> param_grads, RowBody&& row_body) {
  const auto count = static_cast<int64_t>(param_grads.size());
  const int64_t blocks = (rows + kNormBlockRows - 1) / kNormBlockRows, block_floats = count * d;
  float* partials = tl_partials.floats(blocks * block_floats);
  parallel_for_chunks(blocks, grain(kNormBlockRows * d), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      float* part = partials + b * block_floats;
      std::fill(part, part + block_floats, 0.0f);
      for (int64_t row = b * kNormBlockRows; row < std::min(rows, (b + 1) * kNormBlockRows); ++row)
        row_body(row, part);
    }
  });
  parallel_for_chunks(block_floats, grain(blocks), [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      float* grad = param_grads.begin()[j / d] + j % d;
      double sum = *grad;
      for (int64_t b = 0; b < blocks; ++b) sum += partials[b * block_floats + j];
      *grad = static_cast<float>(sum);
    }
  });
}

// dx = g, or dx += g: the f32 addition add() would make of dx and an overwritten g.
inline void write_dx(float& dx, float g, GradWrite dx_write) {
  dx = dx_write == GradWrite::Accumulate ? dx + g : g;
}

}  // namespace

// y = x r w, r = (mean(x^2) + eps)^-1/2 per row; with g = w dy:
//   dx = r g - x r^3 / d * sum(g x),   dweight += sum over rows of dy x r.
void rms_norm_backward(const Tensor& x, const Tensor& weight, float eps, const Tensor& dy, const Tensor& dx,
                       const Tensor& dweight, GradWrite dx_write) {
  const RowDims dims = check_norm_backward("rms_norm_backward", x, weight, dy, dx, dweight, nullptr);
  const int64_t rows = dims.rows, d = dims.d;
  const float* w = weight_as_f32(weight, d);
  const float* xp = x.as<const float>();
  const float* dyp = dy.as<const float>();
  float* dxp = dx.as<float>();
  norm_rows(rows, d, {dweight.as<float>()}, [&](int64_t row, float* dw) {
    const float* xr = xp + row * d;
    const float* dyr = dyp + row * d;
    float* dxr = dxp + row * d;
    double sum_sq = 0, sum_gx = 0;
    for (int64_t i = 0; i < d; ++i) {
      sum_sq += static_cast<double>(xr[i]) * xr[i];
      sum_gx += static_cast<double>(w[i]) * dyr[i] * xr[i];
    }
    const double r = 1.0 / std::sqrt(sum_sq / static_cast<double>(d) + static_cast<double>(eps));
    const double x_coef = r * r * r * sum_gx / static_cast<double>(d);
    const auto rf = static_cast<float>(r);
    for (int64_t i = 0; i < d; ++i) {
      dw[i] += dyr[i] * xr[i] * rf;
      write_dx(dxr[i], static_cast<float>(r * (static_cast<double>(w[i]) * dyr[i]) - xr[i] * x_coef),
               dx_write);
    }
  });
}

// y = xhat w + b, xhat = (x - mean) r, r = (var + eps)^-1/2 (biased variance); with g = w dy:
//   dx = r (g - mean(g) - xhat mean(g xhat)),  dweight += sum dy xhat,  dbias += sum dy.
void layer_norm_backward(const Tensor& x, const Tensor& weight, float eps, const Tensor& dy, const Tensor& dx,
                         const Tensor& dweight, const Tensor& dbias, GradWrite dx_write) {
  const RowDims dims = check_norm_backward("layer_norm_backward", x, weight, dy, dx, dweight, &dbias);
  const int64_t rows = dims.rows, d = dims.d;
  const float* w = weight_as_f32(weight, d);
  const float* xp = x.as<const float>();
  const float* dyp = dy.as<const float>();
  float* dxp = dx.as<float>();
  norm_rows(rows, d, {dweight.as<float>(), dbias.as<float>()}, [&](int64_t row, float* part) {
    const float* xr = xp + row * d;
    const float* dyr = dyp + row * d;
    float* dxr = dxp + row * d;
    float* dw = part;
    float* db = part + d;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) mean += xr[i];
    mean /= static_cast<double>(d);
    for (int64_t i = 0; i < d; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= static_cast<double>(d);
    const double r = 1.0 / std::sqrt(var + static_cast<double>(eps));
    // g = w dy is exact in double: dx of a row that cancels exactly (d = 1) is exactly 0.
    double sum_g = 0, sum_gx = 0;
    for (int64_t i = 0; i < d; ++i) {
      const double g = static_cast<double>(w[i]) * dyr[i];
      sum_g += g;
      sum_gx += g * (xr[i] - mean) * r;
    }
    const double mean_g = sum_g / static_cast<double>(d), mean_gx = sum_gx / static_cast<double>(d);
    const auto rf = static_cast<float>(r), meanf = static_cast<float>(mean);
    for (int64_t i = 0; i < d; ++i) {  // two loops: each vectorizes, one with three outputs would not
      dw[i] += dyr[i] * ((xr[i] - meanf) * rf);
      db[i] += dyr[i];
    }
    for (int64_t i = 0; i < d; ++i)
      write_dx(dxr[i],
               static_cast<float>(
                   r * (static_cast<double>(w[i]) * dyr[i] - mean_g - (xr[i] - mean) * r * mean_gx)),
               dx_write);
  });
}

// ---------------------------------------------------------------- activations

// The derivatives are SIMD kernels beside the forward ones (kernels_impl.h), with the same
// exp and erfc: Tanh gelu' = s + 2 x s (1 - s) u' (s = sigmoid(2u)), Erf gelu' = Phi(x) + x phi(x).
void gelu_backward(const KernelTable& kernels, const Tensor& x, GeluForm form, const Tensor& dy,
                   const Tensor& dx) {
  const int64_t count = check_gelu_backward("gelu_backward", x, dy, dx);
  const float* xp = x.as<const float>();
  const float* dyp = dy.as<const float>();
  float* dxp = dx.as<float>();
  const auto kernel = form == GeluForm::Tanh ? kernels.gelu_tanh_backward : kernels.gelu_erf_backward;
  parallel_for_chunks(count, kMinElementwiseWork,
                      [&](int64_t i0, int64_t i1) { kernel(xp + i0, dyp + i0, i1 - i0, dxp + i0); });
}

// SwiGLU: dgate = dy up s (1 + gate (1 - s)), dup = dy gate s, s = sigmoid(gate); GeGLU:
// dgate = dy up gelu_tanh'(gate), dup = dy gelu_tanh(gate) (kernels_impl.h).
void gated_backward(const KernelTable& kernels, GatedUnit unit, const Tensor& gate, const Tensor& up,
                    const Tensor& dy, const Tensor& dgate, const Tensor& dup) {
  const bool geglu = unit == GatedUnit::GeGlu;
  const int64_t count =
      check_swiglu_backward(geglu ? "geglu_backward" : "swiglu_backward", gate, up, dy, dgate, dup);
  const auto kernel = geglu ? kernels.geglu_backward : kernels.swiglu_backward;
  const float* gp = gate.as<const float>();
  const float* upp = up.as<const float>();
  const float* dyp = dy.as<const float>();
  float* dgp = dgate.as<float>();
  float* dup_p = dup.as<float>();
  parallel_for_chunks(count, kMinElementwiseWork, [&](int64_t i0, int64_t i1) {
    kernel(gp + i0, upp + i0, dyp + i0, i1 - i0, dgp + i0, dup_p + i0);
  });
}

void softcap_backward(const KernelTable& kernels, const Tensor& y, float cap, const Tensor& dy,
                      const Tensor& dx) {
  const int64_t count = check_softcap_backward(cap, y, dy, dx);
  const float* yp = y.as<const float>();
  const float* dyp = dy.as<const float>();
  float* dxp = dx.as<float>();
  parallel_for_chunks(count, kMinElementwiseWork, [&](int64_t i0, int64_t i1) {
    kernels.softcap_backward(yp + i0, cap, dyp + i0, i1 - i0, dxp + i0);
  });
}

// ---------------------------------------------------------------- rope

// Each pair (a, b) was rotated by m R(angle) = m [c -s; s c] (m the magnitude); the gradient
// goes back through m R^T = m R(-angle). The angles are computed exactly as the forward's
// (double, then f32, then times m).
void rope_backward(const Tensor& dx, std::span<const int32_t> positions, const Tensor& inv_freq,
                   RopeLayout layout, float magnitude) {
  const RopeDims dims = check_rope("rope_backward", "dx", dx, positions, inv_freq, magnitude);
  const int64_t n = dims.n, heads = dims.heads, hd = dims.head_dim, half = dims.half;
  float* xp = dx.as<float>();
  const float* freq = inv_freq.as<const float>();
  const bool neox = layout == RopeLayout::Neox;
  parallel_for_chunks(n, grain(heads * hd), [&](int64_t t0, int64_t t1) {
    std::vector<double>& cs = tl_worker_angles;
    if (cs.size() < at(2 * half)) cs.resize(at(2 * half));
    for (int64_t t = t0; t < t1; ++t) {
      for (int64_t j = 0; j < half; ++j) {
        const double angle = static_cast<double>(positions[at(t)]) * static_cast<double>(freq[j]);
        cs[at(j)] = std::cos(angle);
        cs[at(half + j)] = std::sin(angle);
      }
      for (int64_t h = 0; h < heads; ++h) {
        float* v = xp + (t * heads + h) * hd;
        for (int64_t j = 0; j < half; ++j) {
          const int64_t i0 = neox ? j : 2 * j, i1 = neox ? j + half : 2 * j + 1;
          const float c = static_cast<float>(cs[at(j)]) * magnitude,
                      s = static_cast<float>(cs[at(half + j)]) * magnitude;
          const float a = v[i0], b = v[i1];
          v[i0] = a * c + b * s;
          v[i1] = b * c - a * s;
        }
      }
    }
  });
}

// ---------------------------------------------------------------- attention

namespace {

// The attention backward's dot products and row sums are written with AVX2/FMA intrinsics
// (the build's baseline ISA): the compiler vectorizes these small blocked loops poorly, and
// here every dot product has one fixed shape, so that dot(dout_t, out_t) and the
// dot_rows(v_p, dout rows) that it is subtracted from round alike (for a single key, out = v
// and dP - D is then exactly 0).

// The lanes of v added in a fixed order.
float lane_total(__m256 v) {
  alignas(32) float x[8];
  _mm256_store_ps(x, v);
  return ((x[0] + x[4]) + (x[1] + x[5])) + ((x[2] + x[6]) + (x[3] + x[7]));
}

// a . b: 8-lane fused multiply-adds, the lanes totalled, then the tail.
float dot(const float* a, const float* b, int64_t len) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= len; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  float sum = lane_total(acc);
  for (; i < len; ++i) sum = std::fma(a[i], b[i], sum);
  return sum;
}

// y += alpha x.
void axpy(float alpha, const float* x, int64_t len, float* y) {
  for (int64_t i = 0; i < len; ++i) y[i] += alpha * x[i];
}

// Queries that share each pass over the keys: every key row (k, v, and its dk, dv
// accumulators) is loaded once per block rather than once per query.
constexpr int kQueryBlock = 8;

// out[b] = a . rows[b * stride] (as dot computes it) for the kQueryBlock rows b, of which the
// first `count` exist (the others repeat the last one): one pass over `a`.
void dot_rows(const float* a, const float* rows, int64_t stride, int64_t count, int64_t len, float* out) {
  const float* row[kQueryBlock];
  __m256 acc[kQueryBlock];
  for (int b = 0; b < kQueryBlock; ++b) {
    row[b] = rows + std::min<int64_t>(b, count - 1) * stride;
    acc[b] = _mm256_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 8 <= len; i += 8) {
    const __m256 x = _mm256_loadu_ps(a + i);
    for (int b = 0; b < kQueryBlock; ++b) acc[b] = _mm256_fmadd_ps(x, _mm256_loadu_ps(row[b] + i), acc[b]);
  }
  for (int b = 0; b < kQueryBlock; ++b) {
    float sum = lane_total(acc[b]);
    for (int64_t j = i; j < len; ++j) sum = std::fma(a[j], row[b][j], sum);
    out[b] = sum;
  }
}

// y += sum over b in [b0, b1) of c[b] rows[b * stride], each element's terms added in b order
// (fused), 64 elements of y at a time held in registers across the rows.
void add_scaled_rows(const float* c, const float* rows, int64_t stride, int64_t b0, int64_t b1, int64_t len,
                     float* y) {
  constexpr int kVectors = 8;
  int64_t i = 0;
  for (; i + 8 * kVectors <= len; i += 8 * kVectors) {
    __m256 acc[kVectors];
    for (int j = 0; j < kVectors; ++j) acc[j] = _mm256_loadu_ps(y + i + 8 * j);
    for (int64_t b = b0; b < b1; ++b) {
      const __m256 scale = _mm256_set1_ps(c[b]);
      const float* row = rows + b * stride + i;
      for (int j = 0; j < kVectors; ++j)
        acc[j] = _mm256_fmadd_ps(scale, _mm256_loadu_ps(row + 8 * j), acc[j]);
    }
    for (int j = 0; j < kVectors; ++j) _mm256_storeu_ps(y + i + 8 * j, acc[j]);
  }
  for (; i + 8 <= len; i += 8) {
    __m256 acc = _mm256_loadu_ps(y + i);
    for (int64_t b = b0; b < b1; ++b)
      acc = _mm256_fmadd_ps(_mm256_set1_ps(c[b]), _mm256_loadu_ps(rows + b * stride + i), acc);
    _mm256_storeu_ps(y + i, acc);
  }
  for (; i < len; ++i)
    for (int64_t b = b0; b < b1; ++b) y[i] = std::fma(c[b], rows[b * stride + i], y[i]);
}

struct AttentionBackwardArgs {
  const float *q, *k, *v, *out, *dout;
  float *dq, *dk, *dv;
  int64_t n, heads, kv_heads, hd;
  AttentionScores scores;
};

// All of query head h: writes dq[:, h, :] and adds the head's dk, dv to the rows
// dk_h + p * stride, dv_h + p * stride (p = key position), which start at zero. Per key,
// the contributions are added in query order. probs holds kQueryBlock * n floats, and as
// many more after them with a soft cap (each score's slope).
void attention_backward_head(const AttentionBackwardArgs& a, int64_t h, float* dk_h, float* dv_h,
                             int64_t stride, float* probs) {
  const int64_t hd = a.hd, q_row = a.heads * hd, kv_row = a.kv_heads * hd;
  const float* k = a.k + h / (a.heads / a.kv_heads) * hd;  // key p at k + p * kv_row
  const float* v = a.v + h / (a.heads / a.kv_heads) * hd;
  const float scale = a.scores.scale, cap = a.scores.softcap;
  float* slopes = probs + kQueryBlock * a.n;  // with a cap: d(score)/d(q . k) / scale
  for (int64_t t0 = 0; t0 < a.n; t0 += kQueryBlock) {
    const int64_t rows = std::min<int64_t>(kQueryBlock, a.n - t0), keys = t0 + rows;
    // Query t0 + b sees keys first(t0 + b) <= p <= t0 + b, i.e. the block's rows
    // [first_row(p), end_row(p)); no row sees a key before first(t0).
    const auto first = [&](int64_t b) { return a.scores.first_position(t0 + b); };
    const auto first_row = [t0](int64_t p) { return std::max<int64_t>(0, p - t0); };
    const auto end_row = [&](int64_t p) {
      return a.scores.window > 0 ? std::min<int64_t>(rows, p + a.scores.window - t0) : rows;
    };
    const auto offset = [&](int64_t b) { return (t0 + b) * q_row + h * hd; };
    const float* q_block = a.q + offset(0);
    const float* dout_block = a.dout + offset(0);
    float dots[kQueryBlock];
    for (int64_t p = first(0); p < keys; ++p) {
      dot_rows(k + p * kv_row, q_block, q_row, rows, hd, dots);
      for (int64_t b = first_row(p); b < end_row(p); ++b) {
        float score = scale * dots[b];
        if (cap > 0) {
          score = cap * std::tanh(score / cap);
          slopes[b * a.n + p] = (cap - score) * (cap + score) / (cap * cap);  // no cancellation near +-cap
        }
        probs[b * a.n + p] = score;
      }
    }
    float expected_dp[kQueryBlock];  // sum_p P_p dP_p = dout . out
    for (int64_t b = 0; b < rows; ++b) {
      float* row = probs + b * a.n;
      const int64_t begin = first(b), end = t0 + b + 1;
      const float max_score = *std::max_element(row + begin, row + end);
      double sum = 0;
      for (int64_t p = begin; p < end; ++p) sum += (row[p] = std::exp(row[p] - max_score));
      const auto inv_sum = static_cast<float>(1.0 / sum);
      for (int64_t p = begin; p < end; ++p) row[p] *= inv_sum;
      expected_dp[b] = dot(a.dout + offset(b), a.out + offset(b), hd);
      std::fill(a.dq + offset(b), a.dq + offset(b) + hd, 0.0f);
    }
    // Per key: dS of the block's queries (kept in probs in place of P), dk_p and dv_p.
    for (int64_t p = first(0); p < keys; ++p) {
      const int64_t b0 = first_row(p), b1 = end_row(p);
      if (b0 >= b1) continue;
      dot_rows(v + p * kv_row, dout_block, q_row, rows, hd, dots);  // dP_p of each query
      float prob[kQueryBlock], ds[kQueryBlock];
      for (int64_t b = b0; b < b1; ++b) {
        prob[b] = probs[b * a.n + p];
        ds[b] = scale * prob[b] * (dots[b] - expected_dp[b]);
        if (cap > 0) ds[b] *= slopes[b * a.n + p];
        probs[b * a.n + p] = ds[b];
      }
      add_scaled_rows(ds, q_block, q_row, b0, b1, hd, dk_h + p * stride);
      add_scaled_rows(prob, dout_block, q_row, b0, b1, hd, dv_h + p * stride);
    }
    // Per query: dq_t = sum over its keys of dS_p k_p (dq_t starts at zero).
    for (int64_t b = 0; b < rows; ++b)
      add_scaled_rows(probs + b * a.n, k, kv_row, first(b), t0 + b + 1, hd, a.dq + offset(b));
  }
}

}  // namespace

// Softmax rows are recomputed from q and k (max subtracted), then per query t, head h, over
// the keys p it attends to (its window):
//   D = dout_t . out_t,  dS_p = P_p (dout_t . v_p - D) S'_p  (S'_p = scale, or with a soft cap
//   c scale (1 - (S_p / c)^2)),  dq_t = sum_p dS_p k_p,  dk_p += dS_p q_t,  dv_p += P_p dout_t.
// Work item: one query head. With GQA each head's dk, dv go to its own buffer and the
// heads of a group are then summed in head order (deterministic).
void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& dout, AttentionScores scores, const Tensor& dq, const Tensor& dk,
                        const Tensor& dv) {
  const checks::AttentionDims d = checks::check_attention_backward(q, k, v, out, dout, scores, dq, dk, dv);
  if (d.empty()) return;
  const int64_t n = d.n, heads = d.heads, hd = d.head_dim, kv_heads = d.kv_heads;
  const AttentionBackwardArgs a{.q = q.as<const float>(),
                                .k = k.as<const float>(),
                                .v = v.as<const float>(),
                                .out = out.as<const float>(),
                                .dout = dout.as<const float>(),
                                .dq = dq.as<float>(),
                                .dk = dk.as<float>(),
                                .dv = dv.as<float>(),
                                .n = n,
                                .heads = heads,
                                .kv_heads = kv_heads,
                                .hd = hd,
                                .scores = scores};
  const int64_t group = heads / kv_heads, head_floats = n * hd;
  // Without GQA each head owns its columns of dk, dv; with it, heads write [heads, n, hd]
  // buffers (dk's, then dv's) that are summed per group below.
  float* head_grads = group == 1 ? nullptr : tl_head_grads.floats(2 * heads * head_floats);
  parallel_for_chunks(heads, 1, [&](int64_t h0, int64_t h1) {
    float* probs = tl_worker_probs.floats((scores.softcap > 0 ? 2 : 1) * kQueryBlock * n);
    for (int64_t h = h0; h < h1; ++h) {
      float* dk_h = group == 1 ? a.dk + h * hd : head_grads + h * head_floats;
      float* dv_h = group == 1 ? a.dv + h * hd : head_grads + (heads + h) * head_floats;
      const int64_t stride = group == 1 ? kv_heads * hd : hd;
      for (int64_t p = 0; p < n; ++p) {
        std::fill(dk_h + p * stride, dk_h + p * stride + hd, 0.0f);
        std::fill(dv_h + p * stride, dv_h + p * stride + hd, 0.0f);
      }
      attention_backward_head(a, h, dk_h, dv_h, stride, probs);
    }
  });
  if (group == 1) return;
  // dk[p, g, :] = sum over the group's heads j of head_grads[g * group + j][p, :]; dv alike.
  parallel_for_chunks(2 * n * kv_heads, grain(group * hd), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t which = r / (n * kv_heads), p = r % (n * kv_heads) / kv_heads, g = r % kv_heads;
      float* dst = (which == 0 ? a.dk : a.dv) + (p * kv_heads + g) * hd;
      const float* src = head_grads + (which * heads + g * group) * head_floats + p * hd;
      std::copy(src, src + hd, dst);
      for (int64_t j = 1; j < group; ++j) axpy(1.0f, src + j * head_floats, hd, dst);
    }
  });
}

}  // namespace tokenmill::cpu
