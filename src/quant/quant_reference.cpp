// Row-level entry points of the scalar reference implementation: checks the row length
// and dispatches on the DType. The plain types (f32, bf16, f16) are handled here; the block
// formats run the per-block arithmetic of quant_block_math.h (which documents their bit
// layouts) over the row, and the weight quantisers of quant_legacy.cpp (32-weight blocks)
// and quant_kquants_quantize.cpp (k-quants).
#include "quant/quant_reference.h"

#include <cstring>

#include "core/error.h"
#include "quant/quant_formats.h"
#include "quant/quant_reference_detail.h"

namespace tokenmill::quant {

namespace {

// Blocks in a row of k elements of `type`; Error unless k is a whole number of blocks.
int64_t row_blocks(const char* what, DType type, int64_t k) {
  const int64_t block = dtype_block_size(type);
  if (k < 0 || k % block != 0)
    fail("{}: a {} row of {} elements is not a whole number of {}-element blocks", what, dtype_name(type), k,
         block);
  return k / block;
}

template <class Block>
void dequantize_blocks(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += Block::kWeights) {
    const auto b = block::load<Block>(src, i);
    for (int j = 0; j < Block::kWeights; ++j) dst[j] = block::weight(b, j);
  }
}

// An activation format, or Q8_0 weights (quantize_row_q8_0_ref).
template <class Block>
void quantize_blocks(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += Block::kWeights) {
    Block b{};
    block::quantize(src, b);
    block::store(dst, i, b);
  }
}

// The block terms added in f32, block by block (ggml's generic vec_dot order).
template <class Weights, class Activations>
float dot_blocks(const void* w, const void* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i)
    sum += block::dot(block::load<Weights>(w, i), block::load<Activations>(a, i));
  return sum;
}

}  // namespace

void dequantize_row(DType type, const void* src, float* dst, int64_t k) {
  const int64_t nb = row_blocks("dequantize_row", type, k);
  switch (type) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(k) * sizeof(float)); return;
    case DType::BF16:
    case DType::F16:
      for (int64_t i = 0; i < k; ++i) dst[i] = load_as_f32(src, type, static_cast<size_t>(i));
      return;
    case DType::Q4_0: dequantize_blocks<BlockQ4_0>(src, dst, nb); return;
    case DType::Q4_1: dequantize_blocks<BlockQ4_1>(src, dst, nb); return;
    case DType::Q5_0: dequantize_blocks<BlockQ5_0>(src, dst, nb); return;
    case DType::Q5_1: dequantize_blocks<BlockQ5_1>(src, dst, nb); return;
    case DType::Q8_0: dequantize_blocks<BlockQ8_0>(src, dst, nb); return;
    case DType::Q8_1: dequantize_blocks<BlockQ8_1>(src, dst, nb); return;
    case DType::MXFP4: dequantize_blocks<BlockMXFP4>(src, dst, nb); return;
    case DType::Q4_K: dequantize_blocks<BlockQ4_K>(src, dst, nb); return;
    case DType::Q5_K: dequantize_blocks<BlockQ5_K>(src, dst, nb); return;
    case DType::Q6_K: dequantize_blocks<BlockQ6_K>(src, dst, nb); return;
    case DType::Q8_K: dequantize_blocks<BlockQ8_K>(src, dst, nb); return;
  }
  fail("dequantize_row: no implementation for {}", dtype_name(type));
}

void quantize_row(DType type, const float* src, void* dst, int64_t k) {
  const int64_t nb = row_blocks("quantize_row", type, k);
  switch (type) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(k) * sizeof(float)); return;
    case DType::BF16:
    case DType::F16: {
      auto* out = static_cast<unsigned char*>(dst);
      for (int64_t i = 0; i < k; ++i) {
        const uint16_t h = type == DType::BF16 ? f32_to_bf16(src[i]) : f32_to_f16(src[i]);
        std::memcpy(out + 2 * i, &h, 2);  // dst may be unaligned
      }
      return;
    }
    case DType::Q4_0: detail::quantize_q4_0(src, dst, nb); return;
    case DType::Q4_1: detail::quantize_q4_1(src, dst, nb); return;
    case DType::Q5_0: detail::quantize_q5_0(src, dst, nb); return;
    case DType::Q5_1: detail::quantize_q5_1(src, dst, nb); return;
    case DType::Q8_0: quantize_blocks<BlockQ8_0>(src, dst, nb); return;
    case DType::Q8_1: quantize_blocks<BlockQ8_1>(src, dst, nb); return;
    case DType::MXFP4: detail::quantize_mxfp4(src, dst, nb); return;
    case DType::Q4_K: detail::quantize_q4_k(src, dst, nb); return;
    case DType::Q5_K: detail::quantize_q5_k(src, dst, nb); return;
    case DType::Q6_K: detail::quantize_q6_k(src, dst, nb); return;
    case DType::Q8_K: quantize_blocks<BlockQ8_K>(src, dst, nb); return;
  }
  fail("quantize_row: no implementation for {}", dtype_name(type));
}

float vec_dot_row(DType weight_type, const void* w, const void* a, int64_t k) {
  activation_type(weight_type);  // Error for the activation formats Q8_1 / Q8_K
  const int64_t nb = row_blocks("vec_dot_row", weight_type, k);
  switch (weight_type) {
    case DType::F32:
    case DType::BF16:
    case DType::F16: {
      // f32 activations, products and sum in f32 in index order.
      float sum = 0.0f;
      for (int64_t i = 0; i < k; ++i) {
        const auto at = static_cast<size_t>(i);
        sum += load_as_f32(w, weight_type, at) * load_as_f32(a, DType::F32, at);
      }
      return sum;
    }
    case DType::Q4_0: return dot_blocks<BlockQ4_0, BlockQ8_0>(w, a, nb);
    case DType::Q4_1: return dot_blocks<BlockQ4_1, BlockQ8_1>(w, a, nb);
    case DType::Q5_0: return dot_blocks<BlockQ5_0, BlockQ8_0>(w, a, nb);
    case DType::Q5_1: return dot_blocks<BlockQ5_1, BlockQ8_1>(w, a, nb);
    case DType::Q8_0: return dot_blocks<BlockQ8_0, BlockQ8_0>(w, a, nb);
    case DType::MXFP4: return dot_blocks<BlockMXFP4, BlockQ8_0>(w, a, nb);
    case DType::Q4_K: return dot_blocks<BlockQ4_K, BlockQ8_K>(w, a, nb);
    case DType::Q5_K: return dot_blocks<BlockQ5_K, BlockQ8_K>(w, a, nb);
    case DType::Q6_K: return dot_blocks<BlockQ6_K, BlockQ8_K>(w, a, nb);
    case DType::Q8_1:
    case DType::Q8_K: break;  // rejected by activation_type above
  }
  fail("vec_dot_row: no implementation for weight type {}", dtype_name(weight_type));
}

}  // namespace tokenmill::quant
