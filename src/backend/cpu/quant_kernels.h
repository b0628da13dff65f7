// The CPU kernels for matmul with ggml-quantized weights (quant/quant_formats.h).
//
// y[t, r] = x[t, :] . w[r, :] is computed as ggml computes it: each row of x is first
// quantized to a := quant::activation_type(w) (Q8_0, Q8_1 or Q8_K, exactly as
// quant::quantize_row does it), then every output is a sum over blocks of exact integer
// dot products scaled in f32. Only the f32 summation order differs from
// quant::vec_dot_row.
//
// Batch invariance: every output (t, r) is computed by one fixed sequence of f32 operations
// that depends only on w's row r and a's row t, whatever the tile it is computed in, the
// number of tokens n, or how threads split the rows. Integer block sums are exact, so the
// kernels may form them in any order; the f32 steps are fixed. Per 32-weight block b
// (Q4_0 ... Q8_0, MXFP4), with isum_b the integer sum of (q_w - o) * q_a:
//     acc  = fma(f32(isum_b), d_w[b] * d_a[b], acc)
//     accm = accm + m_w[b] * s_a[b]                        (Q4_1, Q5_1 only)
//     y    = (acc + accm) + bias
// and per 256-weight super-block i (Q4_K, Q5_K, Q6_K), isum_i and msum_i the integer sums
// of quant_kquants_impl.h:
//     acc  = fma(f32(isum_i), d_w[i] * d_a[i], acc)
//     accm = fma(f32(msum_i), dmin_w[i] * d_a[i], accm)    (Q4_K, Q5_K mins)
//     y    = (acc - accm) + bias
// The kernels keep one such output per f32 lane (8 rows per vector).
//
// Activation layout ("panel", filled by prepare_activations, read by matmul): per token t
// the int8 levels of the row and per block its scale(s), transposed so that a tile of
// tokens reads its scales as one vector:
//     qs[t * k + j]                int8 levels of token t
//     d[b * ld + t], s[b * ld + t] f32 d (and Q8_1's s), ld = n rounded up to 4, 0 beyond n
//     corr[t * nb + b]             32-weight blocks whose weight levels carry an offset o
//                                  (w = d (q - o): Q4_0, Q5_0, MXFP4, and Q8_0 where the ISA
//                                  adds 128 to make them unsigned): -o * (sum of the block's a)
//     bsums[(t * nb + i) * 16 + j] Q8_K: sums of the 16 levels of sub-block j
//     bsums32[(t * nb + i) * 8 + j] Q8_K: sums of the 32 levels of sub-block j
#pragma once

#include <cstdint>

#include "backend/cpu/kernels.h"
#include "core/dtype.h"

namespace tokenmill::cpu {

// Pointers into the activation panel; see the layout above. Unused arrays may be null.
struct QuantActivations {
  int8_t* qs = nullptr;
  float* d = nullptr;
  float* s = nullptr;
  int32_t* corr = nullptr;
  int16_t* bsums = nullptr;
  int16_t* bsums32 = nullptr;
  int64_t ld = 0;
};

struct QuantMatmulArgs {
  MatmulArgs mm;  // x, w (quantized w_dtype), bias, y, n, k, m
  QuantActivations act;
};

// Bytes of each panel array for n tokens of k activations of weight type w_dtype
// (0 when the type does not use it); the panel is laid out in this order, each array
// 64-byte aligned.
struct QuantPanelSizes {
  int64_t qs = 0, d = 0, s = 0, corr = 0, bsums = 0, bsums32 = 0;
  int64_t total() const { return qs + d + s + corr + bsums + bsums32; }
};
QuantPanelSizes quant_panel_sizes(DType w_dtype, int64_t n, int64_t k);
// Points `act` into `panel` (64-byte aligned, quant_panel_sizes(...).total() bytes).
QuantActivations quant_panel_layout(DType w_dtype, int64_t n, int64_t k, void* panel);

struct QuantKernelTable {
  const char* isa = "";

  // Whether `matmul` has a SIMD path for weight type `w` (else it runs the scalar reference).
  bool (*has_simd)(DType w) = nullptr;

  // Quantizes one row of k floats to `act_dtype` (Q8_0, Q8_1, Q8_K) as ggml blocks, byte
  // for byte what quant::quantize_row writes.
  void (*quantize_row)(DType act_dtype, const float* x, int64_t k, void* dst) = nullptr;

  // Fills the activation panel for tokens [t0, t1) from a.mm.x.
  void (*prepare_activations)(const QuantMatmulArgs& a, int64_t t0, int64_t t1) = nullptr;

  // y[t, r] for tokens [t0, t1) and rows [m0, m1), any ranges. `work`: this thread's
  // 64-byte aligned scratch of work_bytes(w_dtype, k) bytes.
  void (*matmul)(const QuantMatmulArgs& a, int64_t m0, int64_t m1, int64_t t0, int64_t t1,
                 uint8_t* work) = nullptr;
  int64_t (*work_bytes)(DType w_dtype, int64_t k) = nullptr;
};

const QuantKernelTable& quant_kernels_avx2();
// AVX-512 F/BW/VL/DQ + VNNI (vpdpbusd); call only when the CPU has all of them.
const QuantKernelTable& quant_kernels_avx512_vnni();

}  // namespace tokenmill::cpu
