#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "backend/checks/layer_checks.h"
#include "backend/checks/linear_checks.h"
#include "backend/checks/shape_checks.h"
#include "backend/cpu/amx_gemm.h"
#include "backend/cpu/cpu_attention.h"
#include "backend/cpu/cpu_backward.h"
#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/grain.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/lora_kernels.h"
#include "backend/cpu/quant_kernels.h"
#include "backend/cpu/quant_matmul.h"
#include "backend/cpu/scratch.h"
#include "core/error.h"
#include "core/parallel.h"
#include "quant/quant_reference.h"

namespace tokenmill {

namespace {

using checks::describe;
using checks::expect_data;
using cpu::grain_for;
using cpu::kElementAlign;
using cpu::KernelTable;
using cpu::kGemvSharedTailDivisor;
using cpu::kGemvTailChunkBytes;
using cpu::kMinElementwiseWork;
using cpu::kMinMatmulWork;
using cpu::Scratch;

// ---------------------------------------------------------------- scratch memory

// One set per thread: the calling thread's buffers are shared read-only with the workers
// of the parallel region it starts; each worker uses its own worker buffers.
thread_local Scratch tl_vector_a;  // caller: bias / norm weight converted to f32
thread_local Scratch tl_vector_b;  // caller: layer norm bias converted to f32

// Backend::matmul_shared runs up to this many targets in one pass (a layer's q, k, v),
// each with its bias converted to f32 in its own caller buffer.
constexpr size_t kMaxSharedTargets = 3;
thread_local std::array<Scratch, kMaxSharedTargets> tl_shared_biases;
thread_local std::vector<cpu::MatmulArgs> tl_many_args;  // matmul_many's products
thread_local std::vector<int64_t> tl_first_rows;         // gemv_pass's row offsets
thread_local std::vector<cpu::LoraRows> tl_lora_rows;    // add_lora's segments

// The caller's RoPE table: cos and sin of every token's angles, float, each times the
// magnitude, [token][cos half, sin half], and the positions, frequencies and magnitude it was
// computed for. Every layer's q and k of a forward pass rotate by the same angles: the table
// is computed once and then reused.
struct RopeTable {
  std::vector<int32_t> positions;
  std::vector<float> freq;
  float magnitude = 0.0f;
  std::vector<float> cos_sin;

  bool holds(std::span<const int32_t> p, std::span<const float> f, float m) const {
    const auto bits = [](float v) { return std::bit_cast<uint32_t>(v); };  // -0 is not +0
    return m == magnitude && std::ranges::equal(p, positions) && std::ranges::equal(f, freq, {}, bits, bits);
  }
};
thread_local RopeTable tl_rope_table;

// ---------------------------------------------------------------- shape checks

// A [d] vector of any dtype as f32: the tensor itself when f32, else converted in `scratch`.
const float* vector_as_f32(const KernelTable& kernels, const char* op, const char* name, const Tensor& v,
                           int64_t d, Scratch& scratch) {
  if (v.numel() != d) fail("{}: {} must have {} elements, got {}", op, name, d, describe(v));
  expect_data(op, name, v);
  if (v.dtype == DType::F32) return v.as<const float>();
  float* f = scratch.floats(d);
  if (is_quantized(v.dtype)) {
    quant::dequantize_row(v.dtype, v.data, f, d);  // the kernels convert plain types only
  } else {
    kernels.convert_to_f32(v.data, v.dtype, d, f);
  }
  return f;
}

// ---------------------------------------------------------------- the backend

class CpuBackend final : public Backend {
 public:
  CpuBackend(const KernelTable& kernels, const cpu::QuantKernelTable& quant_kernels,
             const cpu::GemmKernels* amx_gemm, CpuIsa isa)
      : kernels_(kernels),
        quant_kernels_(quant_kernels),
        amx_gemm_(amx_gemm),
        name_("cpu-" + std::string(cpu_isa_name(isa))) {}

  std::string_view name() const override { return name_; }
  DeviceMemory& memory() override { return host_memory(); }

  void embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) override {
    const checks::EmbeddingDims dims = checks::check_embedding(table, ids, out);
    const int64_t d = dims.d, n = dims.n;
    const size_t row_bytes = dtype_row_bytes(table.dtype, d);
    const auto* base = static_cast<const char*>(table.data);
    float* y = out.as<float>();
    const bool quantized = is_quantized(table.dtype);
    parallel_for_balanced(n, grain_for(d, kMinElementwiseWork), 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const char* row = base + static_cast<size_t>(ids[static_cast<size_t>(t)]) * row_bytes;
        if (quantized) {
          quant::dequantize_row(table.dtype, row, y + t * d, d);  // one row per token: scalar is fine
        } else {
          kernels_.convert_to_f32(row, table.dtype, d, y + t * d);
        }
      }
    });
  }

  void combine_rows(const Tensor& x, std::span<const int32_t> rows, std::span<const float> scales,
                    const Tensor& y) override {
    const checks::CombineDims dims = checks::check_combine_rows(x, rows, scales, y);
    const int64_t d = dims.d, k = dims.k;
    const float* in = x.as<const float>();
    float* out = y.as<float>();
    parallel_for_balanced(dims.n, grain_for(d * k, kMinElementwiseWork), 1, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        float* y_row = out + r * d;
        std::fill(y_row, y_row + d, 0.0f);
        for (int64_t j = r * k; j < (r + 1) * k; ++j) {
          const float s = scales[static_cast<size_t>(j)];
          const float* x_row = in + static_cast<int64_t>(rows[static_cast<size_t>(j)]) * d;
          for (int64_t c = 0; c < d; ++c) y_row[c] += s * x_row[c];
        }
      }
    });
  }

  void matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) override {
    const cpu::MatmulArgs a = matmul_args(x, w, bias, y, tl_vector_a);
    if (a.n == 0 || a.m == 0) return;
    if (a.k == 0) {  // empty sums: y = bias or 0
      for (int64_t t = 0; t < a.n; ++t)
        for (int64_t r = 0; r < a.m; ++r) a.y[t * a.m + r] = a.bias != nullptr ? a.bias[r] : 0.0f;
      return;
    }
    if (is_quantized(w.dtype)) {
      cpu::quantized_matmul(quant_kernels_, a);
      return;
    }
    if (gemv_applies(a)) {
      gemv_parallel(a.m, a, [&](int64_t m0, int64_t m1) { kernels_.gemv(a, m0, m1); });
      return;
    }
    cpu::gemm(*gemm_kernels(a), a);
  }

  // Plain weights: one parallel pass over all the targets, so the threads wait for each
  // other once, not once per weight, and a prefill packs x once. Neither kernel's results
  // depend on how the work is split (a GEMV row is summed in one order, a GEMM output's sums
  // do not depend on its task): every output is matmul()'s bit for bit. Anything else:
  // matmul() per target.
  void matmul_shared(const Tensor& x, std::span<const MatmulTarget> targets) override {
    const size_t count = targets.size();
    if (count == 0 || count > kMaxSharedTargets) {
      Backend::matmul_shared(x, targets);
      return;
    }
    checks::check_matmul_shared(x, targets);
    std::array<cpu::MatmulArgs, kMaxSharedTargets> args;
    for (size_t i = 0; i < count; ++i)
      args[i] = matmul_args(x, *targets[i].w, targets[i].bias, *targets[i].y, tl_shared_biases[i]);
    const bool decode = gemv_applies(args[0]);
    bool one_pass = args[0].n > 0;
    for (size_t i = 0; i < count; ++i)  // GEMMs: one kernel set for all (AMX takes only bf16)
      one_pass = one_pass && args[i].m > 0 && args[i].k > 0 && !is_quantized(args[i].w_dtype) &&
                 (decode || gemm_kernels(args[i]) == gemm_kernels(args[0]));
    if (!one_pass) {  // checked again there: cheap next to the products
      Backend::matmul_shared(x, targets);
      return;
    }
    if (!decode) {
      cpu::gemm_shared(*gemm_kernels(args[0]), std::span(args.data(), count));
      return;
    }
    gemv_pass(std::span(args.data(), count));
  }

  // Decode steps without biases (a mixture of experts' experts for a few tokens): one
  // parallel pass over all the products' rows, plain weights through the GEMV and quantized
  // ones through quantized_decode_many, every output matmul()'s bit for bit. Anything else
  // (a prefill, biases, weights of both kinds): matmul() per product.
  void matmul_many(std::span<const MatmulProduct> products) override {
    checks::check_matmul_many(products);
    std::vector<cpu::MatmulArgs>& args = tl_many_args;
    args.clear();
    bool plain = !products.empty(), quantized = !products.empty();
    for (const MatmulProduct& p : products) {
      const cpu::MatmulArgs a = matmul_args(*p.x, *p.w, nullptr, *p.y, tl_vector_a);
      plain = plain && p.bias == nullptr && gemv_applies(a);
      quantized = quantized && p.bias == nullptr && is_quantized(a.w_dtype) && a.n >= 1 &&
                  a.n <= cpu::kQuantDecodeTokens && a.m > 0 && a.k > 0 && quant_kernels_.has_simd(a.w_dtype);
      args.push_back(a);
    }
    if (quantized) {
      cpu::quantized_decode_many(quant_kernels_, args);
    } else if (plain) {
      gemv_pass(args);
    } else {
      for (const MatmulProduct& p : products) matmul(*p.x, *p.w, p.bias, *p.y);
    }
  }

  void add_lora(const Tensor& x, std::span<const LoraSegment> segments, const Tensor& y) override {
    const checks::LoraDims dims = checks::check_add_lora(x, segments, y);
    std::vector<cpu::LoraRows>& rows = tl_lora_rows;
    rows.clear();
    for (const LoraSegment& s : segments)
      rows.push_back({.first_row = s.first_row,
                      .rows = s.rows,
                      .rank = s.a->dim(0),
                      .a = s.a->as<const float>(),
                      .b = s.b->as<const float>()});
    cpu::add_lora(kernels_, {.x = x.as<const float>(),
                             .y = y.as<float>(),
                             .k = dims.k,
                             .m = dims.m,
                             .covered_rows = dims.covered_rows,
                             .max_rank = dims.max_rank,
                             .multiply_adds = dims.multiply_adds,
                             .segments = rows});
  }

  void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) override {
    const char* op = "rms_norm";
    const checks::RowDims dims = checks::check_norm(op, x, weight, nullptr, y);
    const float* w = vector_as_f32(kernels_, op, "weight", weight, dims.d, tl_vector_a);
    norm_rows(dims, {x.as<const float>()}, y, [&](const float* xr, int64_t rows, float* yr) {
      kernels_.rms_norm(xr, w, eps, rows, dims.d, yr);
    });
  }

  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                  const Tensor& y) override {
    const char* op = "layer_norm";
    const checks::RowDims dims = checks::check_norm(op, x, weight, &bias, y);
    const float* w = vector_as_f32(kernels_, op, "weight", weight, dims.d, tl_vector_a);
    const float* b = vector_as_f32(kernels_, op, "bias", bias, dims.d, tl_vector_b);
    norm_rows(dims, {x.as<const float>()}, y, [&](const float* xr, int64_t rows, float* yr) {
      kernels_.layer_norm(xr, w, b, eps, rows, dims.d, yr);
    });
  }

  void add_rms_norm(const Tensor& a, const Tensor& b, const Tensor& sum, const Tensor& weight, float eps,
                    const Tensor& y) override {
    const char* op = "add_rms_norm";
    const checks::RowDims dims = checks::check_add_norm(op, a, b, sum, weight, nullptr, y);
    const float* w = vector_as_f32(kernels_, op, "weight", weight, dims.d, tl_vector_a);
    norm_rows(dims, residual_input(a, b, sum), y, [&](const float* xr, int64_t rows, float* yr) {
      kernels_.rms_norm(xr, w, eps, rows, dims.d, yr);
    });
  }

  void add_layer_norm(const Tensor& a, const Tensor& b, const Tensor& sum, const Tensor& weight,
                      const Tensor& bias, float eps, const Tensor& y) override {
    const char* op = "add_layer_norm";
    const checks::RowDims dims = checks::check_add_norm(op, a, b, sum, weight, &bias, y);
    const float* w = vector_as_f32(kernels_, op, "weight", weight, dims.d, tl_vector_a);
    const float* bias_f32 = vector_as_f32(kernels_, op, "bias", bias, dims.d, tl_vector_b);
    norm_rows(dims, residual_input(a, b, sum), y, [&](const float* xr, int64_t rows, float* yr) {
      kernels_.layer_norm(xr, w, bias_f32, eps, rows, dims.d, yr);
    });
  }

  void gelu(const Tensor& x, GeluForm form, const Tensor& y) override {
    unary("gelu", x, y, form == GeluForm::Tanh ? kernels_.gelu_tanh : kernels_.gelu_erf);
  }
  void silu(const Tensor& x, const Tensor& y) override { unary("silu", x, y, kernels_.silu); }
  void swiglu(const Tensor& gate, const Tensor& up, const Tensor& y) override {
    binary("swiglu", gate, up, y, kernels_.swiglu);
  }
  void geglu(const Tensor& gate, const Tensor& up, const Tensor& y) override {
    binary("geglu", gate, up, y, kernels_.geglu);
  }
  void clamped_swiglu(const Tensor& gate, const Tensor& up, float alpha, float limit,
                      const Tensor& y) override {
    checks::check_clamped_swiglu(alpha, limit);
    const int64_t count = checks::check_binary("clamped_swiglu", gate, up, y);
    const float* g = gate.as<const float>();
    const float* u = up.as<const float>();
    float* yp = y.as<float>();
    parallel_for_balanced(count, kMinElementwiseWork, kElementAlign, [&](int64_t i0, int64_t i1) {
      kernels_.clamped_swiglu(g + i0, u + i0, i1 - i0, alpha, limit, yp + i0);
    });
  }
  void softcap(const Tensor& x, float cap, const Tensor& y) override {
    checks::check_softcap(cap);
    unary("softcap", x, y,
          [this, cap](const float* xs, int64_t count, float* ys) { kernels_.softcap(xs, cap, count, ys); });
  }
  void scale(const Tensor& x, float factor, const Tensor& y) override {
    unary("scale", x, y, [this, factor](const float* xs, int64_t count, float* ys) {
      kernels_.scale(xs, factor, count, ys);
    });
  }
  void add(const Tensor& a, const Tensor& b, const Tensor& y) override {
    binary("add", a, b, y, kernels_.add);
  }

  void rope(const Tensor& x, std::span<const int32_t> positions, const Tensor& inv_freq, RopeLayout layout,
            float magnitude) override {
    const checks::RopeDims dims = checks::check_rope("rope", "x", x, positions, inv_freq, magnitude);
    const int64_t n = dims.n, heads = dims.heads, hd = dims.head_dim, half = dims.half;
    float* xp = x.as<float>();
    const float* freq = inv_freq.as<const float>();
    const bool neox = layout == RopeLayout::Neox;
    const float* table = rope_table(positions, std::span(freq, static_cast<size_t>(half)), magnitude);
    parallel_for_balanced(n, grain_for(heads * hd, kMinElementwiseWork), 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const float* cos = table + t * 2 * half;
        const float* sin = cos + half;
        for (int64_t h = 0; h < heads; ++h) {
          float* v = xp + (t * heads + h) * hd;
          if (neox) {  // pairs (j, j + half): a loop the compiler vectorises
            float* upper = v + half;
            for (int64_t j = 0; j < half; ++j) {
              const float a = v[j], b = upper[j];
              v[j] = a * cos[j] - b * sin[j];
              upper[j] = b * cos[j] + a * sin[j];
            }
          } else {  // pairs (2j, 2j + 1)
            for (int64_t j = 0; j < half; ++j) {
              const float a = v[2 * j], b = v[2 * j + 1];
              v[2 * j] = a * cos[j] - b * sin[j];
              v[2 * j + 1] = b * cos[j] + a * sin[j];
            }
          }
        }
      }
    });
  }

  // The calling thread's RoPE table for these positions, frequencies and magnitude (RopeTable).
  static const float* rope_table(std::span<const int32_t> positions, std::span<const float> freq,
                                 float magnitude) {
    RopeTable& table = tl_rope_table;
    if (table.holds(positions, freq, magnitude)) return table.cos_sin.data();
    const auto half = static_cast<int64_t>(freq.size());
    table.positions.clear();  // the key is set last: a failed allocation leaves no stale match
    table.freq.clear();
    table.cos_sin.resize(positions.size() * 2 * freq.size());
    float* cos_sin = table.cos_sin.data();
    // Work per token: half cos/sin pairs, counted as ~64 element-wise operations each.
    parallel_for_balanced(static_cast<int64_t>(positions.size()), grain_for(half * 64, kMinElementwiseWork),
                          1, [&](int64_t t0, int64_t t1) {
                            for (int64_t t = t0; t < t1; ++t)
                              for (int64_t j = 0; j < half; ++j) {
                                // Angles in double: an f32 product pos * freq is off by up to
                                // ~5e-4 rad at pos 4096.
                                const double angle = static_cast<double>(positions[static_cast<size_t>(t)]) *
                                                     static_cast<double>(freq[static_cast<size_t>(j)]);
                                cos_sin[t * 2 * half + j] = static_cast<float>(std::cos(angle)) * magnitude;
                                cos_sin[t * 2 * half + half + j] =
                                    static_cast<float>(std::sin(angle)) * magnitude;
                              }
                          });
    table.freq.assign(freq.begin(), freq.end());
    table.magnitude = magnitude;
    table.positions.assign(positions.begin(), positions.end());
    return cos_sin;
  }

  // ---------------------------------------------------------------- KV cache (cpu_attention.h)

  void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t first_pos,
                 const AttentionScores& scores, const Tensor& out) override {
    cpu::attention(kernels_, q, k_cache, v_cache, first_pos, scores, out);
  }
  void paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                       std::span<const PagedSequence> sequences, const AttentionScores& scores,
                       const Tensor& out) override {
    cpu::paged_attention(kernels_, q, k_pool, v_pool, sequences, scores, out);
  }
  void store_kv(const Tensor& rows, std::span<const int64_t> slots, const Tensor& pool) override {
    cpu::store_kv(kernels_, rows, slots, pool);
  }

  void convert(const Tensor& x, const Tensor& y) override {
    const int64_t count = checks::check_convert(x, y);
    const float* xp = x.as<const float>();
    const size_t size = dtype_size(y.dtype);
    parallel_for_balanced(count, kMinElementwiseWork, kElementAlign, [&](int64_t i0, int64_t i1) {
      kernels_.convert_from_f32(xp + i0, i1 - i0, y.dtype,
                                static_cast<char*>(y.data) + static_cast<size_t>(i0) * size);
    });
  }

  void softmax(const Tensor& x, const Tensor& y) override {
    const checks::RowDims dims = checks::check_rows("softmax", x, y);
    const int64_t rows = dims.rows, d = dims.d;
    if (d == 0) return;
    const float* xp = x.as<const float>();
    float* yp = y.as<float>();
    parallel_for_balanced(rows, grain_for(d, kMinElementwiseWork), 1, [&](int64_t r0, int64_t r1) {
      kernels_.softmax(xp + r0 * d, r1 - r0, d, yp + r0 * d);
    });
  }

  // ---------------------------------------------------------------- training (cpu_backward.h)

  void matmul_backward(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor* dx, const Tensor* dw,
                       const Tensor* db) override {
    cpu::matmul_backward(kernels_, x, w, dy, dx, dw, db);
  }
  void embedding_backward(std::span<const int32_t> ids, const Tensor& dout, const Tensor& dtable) override {
    cpu::embedding_backward(ids, dout, dtable);
  }
  void rms_norm_backward(const Tensor& x, const Tensor& weight, float eps, const Tensor& dy, const Tensor& dx,
                         const Tensor& dweight, GradWrite dx_write) override {
    cpu::rms_norm_backward(x, weight, eps, dy, dx, dweight, dx_write);
  }
  void layer_norm_backward(const Tensor& x, const Tensor& weight, float eps, const Tensor& dy,
                           const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                           GradWrite dx_write) override {
    cpu::layer_norm_backward(x, weight, eps, dy, dx, dweight, dbias, dx_write);
  }
  void gelu_backward(const Tensor& x, GeluForm form, const Tensor& dy, const Tensor& dx) override {
    cpu::gelu_backward(kernels_, x, form, dy, dx);
  }
  void swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy, const Tensor& dgate,
                       const Tensor& dup) override {
    cpu::gated_backward(kernels_, cpu::GatedUnit::SwiGlu, gate, up, dy, dgate, dup);
  }
  void geglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy, const Tensor& dgate,
                      const Tensor& dup) override {
    cpu::gated_backward(kernels_, cpu::GatedUnit::GeGlu, gate, up, dy, dgate, dup);
  }
  void softcap_backward(const Tensor& y, float cap, const Tensor& dy, const Tensor& dx) override {
    cpu::softcap_backward(kernels_, y, cap, dy, dx);
  }
  void rope_backward(const Tensor& dx, std::span<const int32_t> positions, const Tensor& inv_freq,
                     RopeLayout layout, float magnitude) override {
    cpu::rope_backward(dx, positions, inv_freq, layout, magnitude);
  }
  void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                          const Tensor& dout, AttentionScores scores, const Tensor& dq, const Tensor& dk,
                          const Tensor& dv) override {
    cpu::attention_backward(q, k, v, out, dout, scores, dq, dk, dv);
  }
  void cross_entropy(const Tensor& logits, std::span<const int32_t> targets, float grad_scale,
                     const Tensor& losses, const Tensor* dlogits) override {
    cpu::cross_entropy(logits, targets, grad_scale, losses, dlogits);
  }
  double sum_squares(const Tensor& x) override { return cpu::sum_squares(x); }
  void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                  const AdamW& hyper) override {
    cpu::adamw_step(param, grad, m, v, hyper);
  }

 private:
  // The kernel arguments of matmul (checked), the bias converted to f32 in `bias_scratch`.
  cpu::MatmulArgs matmul_args(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y,
                              Scratch& bias_scratch) const {
    const checks::MatmulDims dims = checks::check_matmul(x, w, bias, y);
    cpu::MatmulArgs a;
    a.x = x.as<const float>();
    a.w = w.data;
    a.w_dtype = w.dtype;
    a.y = y.as<float>();
    a.n = dims.n;
    a.k = dims.k;
    a.m = dims.m;
    if (bias != nullptr) a.bias = vector_as_f32(kernels_, "matmul", "bias", *bias, a.m, bias_scratch);
    return a;
  }

  // Decode regime: a few tokens, plain weights, non-empty.
  static bool gemv_applies(const cpu::MatmulArgs& a) {
    return a.n >= 1 && a.n <= cpu::kGemvMaxTokens && a.m > 0 && a.k > 0 && !is_quantized(a.w_dtype);
  }

  // body(r0, r1) over the GEMV rows [0, rows) of weights shaped as a's, in parallel: a static
  // split, then a shared tail (grain.h) in chunks sized from a's row bytes (matmul_shared's
  // targets may differ in dtype: a chunk's bytes are then approximate). A row's result does
  // not depend on the split.
  template <class Body>
  static void gemv_parallel(int64_t rows, const cpu::MatmulArgs& a, Body&& body) {
    const auto row_bytes = static_cast<int64_t>(dtype_row_bytes(a.w_dtype, a.k));
    parallel_for_shared_tail(rows, grain_for(a.n * a.k, kMinMatmulWork), rows / kGemvSharedTailDivisor,
                             grain_for(row_bytes, kGemvTailChunkBytes), static_cast<Body&&>(body));
  }

  // The GEMVs of several products (gemv_applies to each) in one parallel pass over all their
  // rows, product after product.
  void gemv_pass(std::span<const cpu::MatmulArgs> args) const {
    std::vector<int64_t>& first_row = tl_first_rows;  // of product i, in the pass (the caller's)
    first_row.assign(1, 0);
    for (const cpu::MatmulArgs& a : args) first_row.push_back(first_row.back() + a.m);
    gemv_parallel(first_row.back(), args[0], [&](int64_t r0, int64_t r1) {
      for (size_t i = 0; i < args.size(); ++i) {
        const int64_t m0 = std::max(r0, first_row[i]) - first_row[i];
        const int64_t m1 = std::min(r1, first_row[i] + args[i].m) - first_row[i];
        if (m0 < m1) kernels_.gemv(args[i], m0, m1);
      }
    });
  }

  // Prefill regime (plain weights): the GEMM that takes `a`.
  const cpu::GemmKernels* gemm_kernels(const cpu::MatmulArgs& a) const {
    return amx_gemm_ != nullptr && cpu::amx_gemm_applies(a) ? amx_gemm_ : &kernels_.gemm;
  }

  using BinaryKernel = void (*)(const float*, const float*, int64_t, float*);

  // kernel(x, count, y) over chunks of x's elements, in parallel.
  template <class Kernel>
  static void unary(const char* op, const Tensor& x, const Tensor& y, Kernel kernel) {
    const int64_t count = checks::check_unary(op, x, y);
    const float* xp = x.as<const float>();
    float* yp = y.as<float>();
    parallel_for_balanced(count, kMinElementwiseWork, kElementAlign,
                          [&](int64_t i0, int64_t i1) { kernel(xp + i0, i1 - i0, yp + i0); });
  }

  // The rows a norm reads: x itself, or sum = a + b written first (a_or_x is a, b is set).
  struct NormInput {
    const float* a_or_x = nullptr;
    const float* b = nullptr;
    float* sum = nullptr;
  };
  static NormInput residual_input(const Tensor& a, const Tensor& b, const Tensor& sum) {
    return {a.as<const float>(), b.as<const float>(), sum.as<float>()};
  }

  // Runs norm(x rows, row count, y rows) over the rows in parallel chunks. With a residual
  // input each chunk first writes its rows of sum, then normalises them while they are
  // still in cache; add() writes the same sums, so the result is add() then the norm.
  template <class NormChunk>
  void norm_rows(const checks::RowDims& dims, const NormInput& in, const Tensor& y, NormChunk norm) const {
    const int64_t d = dims.d;
    float* yp = y.as<float>();
    parallel_for_balanced(dims.rows, grain_for(d, kMinElementwiseWork), 1, [&](int64_t r0, int64_t r1) {
      const int64_t offset = r0 * d, rows = r1 - r0;
      const float* x = in.a_or_x + offset;
      if (in.b != nullptr) {
        kernels_.add(x, in.b + offset, rows * d, in.sum + offset);
        x = in.sum + offset;
      }
      norm(x, rows, yp + offset);
    });
  }

  static void binary(const char* op, const Tensor& a, const Tensor& b, const Tensor& y, BinaryKernel kernel) {
    const int64_t count = checks::check_binary(op, a, b, y);
    const float* ap = a.as<const float>();
    const float* bp = b.as<const float>();
    float* yp = y.as<float>();
    parallel_for_balanced(count, kMinElementwiseWork, kElementAlign,
                          [&](int64_t i0, int64_t i1) { kernel(ap + i0, bp + i0, i1 - i0, yp + i0); });
  }

  const KernelTable& kernels_;
  const cpu::QuantKernelTable& quant_kernels_;
  const cpu::GemmKernels* amx_gemm_;  // null unless CpuIsa::Amx
  std::string name_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend_for(CpuIsa isa) {
  if (!cpu_supports(isa))
    fail("the CPU backend cannot use {} on this machine (it has: {})", cpu_isa_name(isa),
         cpu_features_string());
  // kernels_avx512() itself is AVX-512 code: call it only after the check above. The
  // quantized matmul's AVX-512 kernels also need VNNI; without it they run the AVX2 ones.
  // AMX is the AVX-512 set plus the AMX GEMM for bf16 weights and the AMX attention.
  const bool avx512 = isa != CpuIsa::Avx2;
  const KernelTable& kernels = isa == CpuIsa::Amx ? cpu::kernels_amx()
                               : avx512           ? cpu::kernels_avx512()
                                                  : cpu::kernels_avx2();
  const cpu::QuantKernelTable& quant_kernels =
      avx512 && cpu_features().avx512vnni ? cpu::quant_kernels_avx512_vnni() : cpu::quant_kernels_avx2();
  const cpu::GemmKernels* amx_gemm = isa == CpuIsa::Amx ? &cpu::amx_gemm_kernels() : nullptr;
  return std::make_unique<CpuBackend>(kernels, quant_kernels, amx_gemm, isa);
}

std::unique_ptr<Backend> make_cpu_backend() { return make_cpu_backend_for(best_cpu_isa()); }

}  // namespace tokenmill
