#include "backend/cpu/quant_matmul.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/grain.h"
#include "backend/cpu/scratch.h"
#include "core/error.h"
#include "core/parallel.h"
#include "quant/quant_formats.h"
#include "quant/quant_reference.h"

namespace tokenmill::cpu {

namespace {

int64_t round_up(int64_t v, int64_t multiple) { return (v + multiple - 1) / multiple * multiple; }

bool is_kquant(DType w) { return w == DType::Q4_K || w == DType::Q5_K || w == DType::Q6_K; }
// Types whose levels carry an offset the kernels fold into the activations (w = d (q - o)).
bool has_offset(DType w) {
  return w == DType::Q4_0 || w == DType::Q5_0 || w == DType::Q8_0 || w == DType::MXFP4;
}
// Types with a min, multiplied with Q8_1's s.
bool has_min(DType w) { return w == DType::Q4_1 || w == DType::Q5_1; }

// The calling thread's activation panel, shared read-only with the workers it starts.
thread_local Scratch tl_panel;
// A worker's kernel scratch (QuantKernelTable::work_bytes).
thread_local Scratch tl_work;

constexpr int64_t kSerialQuantize = 64 * 1024;         // activations quantized on the calling thread
constexpr int64_t kMinRowWork = 64 * 1024;             // multiply-adds per thread chunk
constexpr int64_t kDecodeTokens = kQuantDecodeTokens;  // up to here: split rows only, stream w once
// Prefill task: a panel of rows x a token range. The kernels widen each group of 8 rows
// once per task (kept in L1) and run every token of the range past it (the range's
// activations, ~1 byte per weight, stay in L2): the widening is spread over 128 tokens.
constexpr int64_t kPanelRows = 32;
constexpr int64_t kRangeTokens = 128;

// Types without a SIMD kernel: ggml blocks through the scalar reference.
void reference_matmul(const MatmulArgs& a) {
  const DType act = quant::activation_type(a.w_dtype);
  if (!is_quantized(act))
    fail("matmul: weight dtype {} is not a quantized weight format", dtype_name(a.w_dtype));
  const auto act_row = static_cast<int64_t>(dtype_row_bytes(act, a.k));
  const auto w_row = static_cast<int64_t>(dtype_row_bytes(a.w_dtype, a.k));
  auto* panel = static_cast<uint8_t*>(tl_panel.bytes(a.n * act_row));
  for (int64_t t = 0; t < a.n; ++t) quant::quantize_row(act, a.x + t * a.k, panel + t * act_row, a.k);
  const auto* w = static_cast<const uint8_t*>(a.w);
  parallel_for_balanced(a.m, grain_for(a.n * a.k, kMinRowWork), 1, [&](int64_t m0, int64_t m1) {
    for (int64_t t = 0; t < a.n; ++t)
      for (int64_t r = m0; r < m1; ++r)
        a.y[t * a.m + r] = quant::vec_dot_row(a.w_dtype, w + r * w_row, panel + t * act_row, a.k) +
                           (a.bias != nullptr ? a.bias[r] : 0.0f);
  });
}

}  // namespace

QuantPanelSizes quant_panel_sizes(DType w_dtype, int64_t n, int64_t k) {
  QuantPanelSizes s;
  const int64_t ld = round_up(n, 4);
  s.qs = round_up(n * k, 64);
  // + 4 floats: a tile may read 4 tokens' scales from its first token on.
  if (is_kquant(w_dtype)) {
    const int64_t nb = k / 256;
    s.d = round_up((nb * ld + 4) * 4, 64);
    s.bsums = round_up(n * nb * 16 * 2, 64);
    s.bsums32 = round_up(n * nb * 8 * 2, 64);
  } else {
    const int64_t nb = k / 32;
    s.d = round_up((nb * ld + 4) * 4, 64);
    if (has_min(w_dtype)) s.s = s.d;
    if (has_offset(w_dtype)) s.corr = round_up(n * nb * 4, 64);
  }
  return s;
}

QuantActivations quant_panel_layout(DType w_dtype, int64_t n, int64_t k, void* panel) {
  const QuantPanelSizes s = quant_panel_sizes(w_dtype, n, k);
  auto* p = static_cast<uint8_t*>(panel);
  QuantActivations act;
  act.ld = round_up(n, 4);
  act.qs = reinterpret_cast<int8_t*>(p);
  p += s.qs;
  act.d = reinterpret_cast<float*>(p);
  p += s.d;
  if (s.s > 0) act.s = reinterpret_cast<float*>(p);
  p += s.s;
  if (s.corr > 0) act.corr = reinterpret_cast<int32_t*>(p);
  p += s.corr;
  if (s.bsums > 0) act.bsums = reinterpret_cast<int16_t*>(p);
  p += s.bsums;
  if (s.bsums32 > 0) act.bsums32 = reinterpret_cast<int16_t*>(p);
  return act;
}

// qa's activation panel laid out in `panel` (sizes: quant_panel_sizes of a), the scales of
// the padding tokens [n, ld) zeroed (whole-tile loads read them).
QuantMatmulArgs panel_args(const MatmulArgs& a, const QuantPanelSizes& sizes, uint8_t* panel) {
  QuantMatmulArgs qa;
  qa.mm = a;
  qa.act = quant_panel_layout(a.w_dtype, a.n, a.k, panel);
  std::memset(qa.act.d, 0, static_cast<size_t>(sizes.d));
  if (qa.act.s != nullptr) std::memset(qa.act.s, 0, static_cast<size_t>(sizes.s));
  return qa;
}

void quantized_decode_many(const QuantKernelTable& kernels, std::span<const MatmulArgs> a) {
  // The calling thread's plan (reused: a decode step does not allocate once it has grown).
  thread_local std::vector<QuantPanelSizes> tl_sizes;
  thread_local std::vector<int64_t> tl_panel_offset, tl_first_row;
  thread_local std::vector<QuantMatmulArgs> tl_args;
  std::vector<QuantPanelSizes>& sizes = tl_sizes;
  std::vector<int64_t>& panel_offset = tl_panel_offset;
  std::vector<int64_t>& first_row = tl_first_row;  // rows padded to the kernels' 8-row groups
  std::vector<QuantMatmulArgs>& qa = tl_args;
  sizes.clear();
  panel_offset.assign(1, 0);
  first_row.assign(1, 0);
  qa.clear();
  int64_t work_bytes = 0, widest = 0;
  for (const MatmulArgs& p : a) {
    sizes.push_back(quant_panel_sizes(p.w_dtype, p.n, p.k));
    panel_offset.push_back(panel_offset.back() + round_up(sizes.back().total(), 64));
    first_row.push_back(first_row.back() + round_up(p.m, 8));
    work_bytes = std::max(work_bytes, kernels.work_bytes(p.w_dtype, p.k));
    widest = std::max(widest, p.n * p.k);
  }
  auto* panels = static_cast<uint8_t*>(tl_panel.bytes(panel_offset.back()));
  for (size_t i = 0; i < a.size(); ++i) {
    qa.push_back(panel_args(a[i], sizes[i], panels + panel_offset[i]));
    kernels.prepare_activations(qa.back(), 0, a[i].n);
  }
  parallel_for_balanced(first_row.back(), grain_for(widest, kMinRowWork), 8, [&](int64_t r0, int64_t r1) {
    auto* work = static_cast<uint8_t*>(tl_work.bytes(work_bytes));
    for (size_t i = 0; i < a.size(); ++i) {
      const int64_t m0 = std::max(r0, first_row[i]) - first_row[i];
      const int64_t m1 = std::min(r1 - first_row[i], a[i].m);
      if (m0 < m1) kernels.matmul(qa[i], m0, m1, 0, a[i].n, work);
    }
  });
}

void quantized_matmul(const QuantKernelTable& kernels, const MatmulArgs& a) {
  if (!kernels.has_simd(a.w_dtype)) {
    reference_matmul(a);
    return;
  }
  const QuantPanelSizes sizes = quant_panel_sizes(a.w_dtype, a.n, a.k);
  QuantMatmulArgs qa = panel_args(a, sizes, static_cast<uint8_t*>(tl_panel.bytes(sizes.total())));

  if (a.n * a.k <= kSerialQuantize) {
    kernels.prepare_activations(qa, 0, a.n);
  } else {
    parallel_for_balanced(a.n, grain_for(a.k, kSerialQuantize / 2), 1,
                          [&](int64_t t0, int64_t t1) { kernels.prepare_activations(qa, t0, t1); });
  }

  const int64_t work_bytes = kernels.work_bytes(a.w_dtype, a.k);
  if (a.n <= kDecodeTokens) {
    parallel_for_balanced(a.m, grain_for(a.n * a.k, kMinRowWork), 8, [&](int64_t m0, int64_t m1) {
      kernels.matmul(qa, m0, m1, 0, a.n, static_cast<uint8_t*>(tl_work.bytes(work_bytes)));
    });
    return;
  }
  const int64_t panels = (a.m + kPanelRows - 1) / kPanelRows;
  const int64_t ranges = (a.n + kRangeTokens - 1) / kRangeTokens;
  parallel_for_balanced(panels * ranges, grain_for(kPanelRows * kRangeTokens * a.k, kMinRowWork), 1,
                        [&](int64_t i0, int64_t i1) {
                          auto* work = static_cast<uint8_t*>(tl_work.bytes(work_bytes));
                          for (int64_t i = i0; i < i1; ++i) {
                            const int64_t p = i / ranges, g = i % ranges;
                            const int64_t m0 = p * kPanelRows, t0 = g * kRangeTokens;
                            kernels.matmul(qa, m0, std::min(a.m, m0 + kPanelRows), t0,
                                           std::min(a.n, t0 + kRangeTokens), work);
                          }
                        });
}

}  // namespace tokenmill::cpu
