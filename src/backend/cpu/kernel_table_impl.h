// The KernelTable of one SIMD wrapper `S`: kernels_avx2.cpp and kernels_avx512.cpp include
// this after their wrapper header (see kernels_impl.h for the rules of these templates).
#pragma once

#include "backend/cpu/attention_impl.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/kernels_impl.h"

namespace tokenmill::cpu {
namespace {

// ---------------------------------------------------------------- the table

// Aggregate initialisation: no KernelTable constructor is emitted in an ISA translation unit.
template <class S>
KernelTable make_kernel_table(const char* isa) {
  return KernelTable{
      .isa = isa,
      .gemv = &gemv<S>,
      .gemm = {.tile_tokens = S::kTileTokens,
               .panel_rows = 2 * S::kWidth,
               .packed_x_floats = &gemm_packed_x_floats<S>,
               .panel_buffer_floats = &gemm_panel_buffer_floats<S>,
               .pack_x = &gemm_pack_x<S>,
               .panel = &gemm_panel<S>},
      .convert_to_f32 = &convert_to_f32<S>,
      .convert_from_f32 = &convert_from_f32<S>,
      .rms_norm = &rms_norm<S>,
      .layer_norm = &layer_norm<S>,
      .gelu_tanh = &gelu_tanh<S>,
      .gelu_erf = &gelu_erf<S>,
      .gelu_tanh_backward = &gelu_tanh_backward<S>,
      .gelu_erf_backward = &gelu_erf_backward<S>,
      .silu = &silu<S>,
      .swiglu = &swiglu<S>,
      .geglu = &geglu<S>,
      .clamped_swiglu = &clamped_swiglu<S>,
      .scale = &scale<S>,
      .softcap = &softcap<S>,
      .swiglu_backward = &swiglu_backward<S>,
      .geglu_backward = &geglu_backward<S>,
      .softcap_backward = &softcap_backward<S>,
      .add = &add<S>,
      .softmax = &softmax<S>,
      .attention = &attention<S>,
      .token_attention = &token_attention<S>,
      .attention_block_tokens = &attention_block_tokens,
  };
}

}  // namespace
}  // namespace tokenmill::cpu
