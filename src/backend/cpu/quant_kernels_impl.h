// The quantized matmul kernel table, instantiated per integer-SIMD policy Q by
// quant_kernels_avx2.cpp and quant_kernels_avx512.cpp (see quant_kernels.h).
//
// A policy provides, on 256-bit vectors:
//   dot(acc, u, s)              acc + per int32 lane the sum of 4 products u8 x s8
//                               (exact for u <= 128, |s| <= 127)
//   dot_scaled(acc, u, s, sc)   acc + per int32 lane sc[2l] (u s pair sum 2l) +
//                               sc[2l+1] (u s pair sum 2l+1), int16 pair sums (no saturation
//                               for u <= 63, |s| <= 127)
//   high_bits(qh)               byte j = 0x10 where bit j of qh is set
//   q8_weights(w), dot_q8(acc, u, s)
//                               Q8_0 weights: u = q8_weights(w) once per block, then
//                               dot_q8 = acc + sum((w + kQ8Offset) * s) per lane
//   kQ8Offset                   0 or 128 (see quant_act_impl.h, weight_offset)
//   kHigh16                     whether dot may take 16 x the high nibbles of Q4_0 / Q4_1
//                               (no shift; the exact multiple of 16 is divided out after)
//   kPrefillTokens              tokens per packed 32-weight-block tile
//   kKTokens                    tokens per packed k-quant tile
#pragma once

#include "backend/cpu/quant_kquants_impl.h"
#include "backend/cpu/quant_legacy_impl.h"

namespace tokenmill::cpu {
namespace {

constexpr bool quant_has_simd(DType w) {
  switch (w) {
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::MXFP4:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return true;
    default: return false;
  }
}

template <class Q>
void quant_matmul(const QuantMatmulArgs& qa, int64_t m0, int64_t m1, int64_t t0, int64_t t1, uint8_t* work) {
  switch (qa.mm.w_dtype) {
    case DType::Q4_0: legacy_matmul<Q, DType::Q4_0>(qa, m0, m1, t0, t1, work); break;
    case DType::Q4_1: legacy_matmul<Q, DType::Q4_1>(qa, m0, m1, t0, t1, work); break;
    case DType::Q5_0: legacy_matmul<Q, DType::Q5_0>(qa, m0, m1, t0, t1, work); break;
    case DType::Q5_1: legacy_matmul<Q, DType::Q5_1>(qa, m0, m1, t0, t1, work); break;
    case DType::Q8_0: legacy_matmul<Q, DType::Q8_0>(qa, m0, m1, t0, t1, work); break;
    case DType::MXFP4: legacy_matmul<Q, DType::MXFP4>(qa, m0, m1, t0, t1, work); break;
    case DType::Q4_K: kquant_matmul<Q, DType::Q4_K>(qa, m0, m1, t0, t1, work); break;
    case DType::Q5_K: kquant_matmul<Q, DType::Q5_K>(qa, m0, m1, t0, t1, work); break;
    case DType::Q6_K: kquant_matmul<Q, DType::Q6_K>(qa, m0, m1, t0, t1, work); break;
    default: break;  // the caller only passes types quant_has_simd accepts
  }
}

template <class Q>
QuantKernelTable make_quant_kernel_table(const char* isa) {
  return QuantKernelTable{
      .isa = isa,
      .has_simd = [](DType w) { return quant_has_simd(w); },
      .quantize_row = &quantize_row_blocks,
      .prepare_activations = &prepare_activations<Q>,
      .matmul = &quant_matmul<Q>,
      // A packed group of rows (legacy_pack_group, kquant_pack_group).
      .work_bytes =
          [](DType, int64_t k) {
            const int64_t legacy = k / 32 * kPackedBlockBytes, kquant = k / 256 * kKPackedBytes;
            return legacy > kquant ? legacy : kquant;
          },
  };
}

}  // namespace
}  // namespace tokenmill::cpu
