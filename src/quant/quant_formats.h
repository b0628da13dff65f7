// The block layouts of ggml's quantized formats, byte for byte as GGUF files store them.
//
// A row of k weights is k / QK blocks laid end to end (no padding, any alignment: a
// block in a mapped file may sit at any byte offset, so read blocks through memcpy or
// unaligned loads). `d`, `m`, `dmin` and `s` are IEEE binary16 bit patterns unless noted.
//
// 32-weight formats, weight j of a block (j < 16: low nibble of qs[j]; j >= 16: high
// nibble of qs[j - 16]; the 5-bit formats take bit j of qh (little-endian u32) as bit 4):
//   Q4_0  w = d * (q - 8)        q in [0, 16)
//   Q4_1  w = d * q + m          q in [0, 16)
//   Q5_0  w = d * (q - 16)       q in [0, 32)
//   Q5_1  w = d * q + m          q in [0, 32)
//   Q8_0  w = d * q              q in [-128, 128)
//   Q8_1  w = d * q; s = d * sum(q) (an activation format)
//   MXFP4 w = v(q) * 2^(e - 128)  q in [0, 16), v(q) = 2 * the FP4 E2M1 value of q (ggml's
//         kvalues_mxfp4: 0 1 2 3 4 6 8 12 for q = 0..7, the negatives for q = 8..15), e a
//         u8 (e8m0) in place of d
// 256-weight "k-quants": 8 (Q4_K, Q5_K) or 16 (Q6_K) sub-blocks, each with its own scale
// (and min), themselves quantized against the f16 super-block scales:
//   Q4_K  w = d * sc[i] * q - dmin * mn[i]      sub-block i of 32, q 4 bits, sc/mn 6 bits
//   Q5_K  as Q4_K with q 5 bits (bit 4 in qh)
//   Q6_K  w = d * scales[i] * (q - 32)          sub-block i of 16, q 6 bits (4 in ql, 2 in qh)
//   Q8_K  w = d * q, d an f32, bsums[i] = sum of q over sub-block i of 16 (activations)
// The exact bit positions are documented with the per-block arithmetic, quant_block_math.h.
// Each block struct's kWeights is its number of weights.
#pragma once

#include <cstdint>
#include <optional>

#include "core/dtype.h"

namespace tokenmill::quant {

inline constexpr int kBlock32 = 32;      // QK4_0 = QK4_1 = QK5_0 = QK5_1 = QK8_0 = QK8_1 = QK_MXFP4
inline constexpr int kBlock256 = 256;    // QK_K
inline constexpr int kScaleBytesK = 12;  // K_SCALE_SIZE: 8 six-bit scales + 8 six-bit mins

struct BlockQ4_0 {
  static constexpr int kWeights = kBlock32;
  uint16_t d;
  uint8_t qs[kBlock32 / 2];
};
struct BlockQ4_1 {
  static constexpr int kWeights = kBlock32;
  uint16_t d, m;
  uint8_t qs[kBlock32 / 2];
};
struct BlockQ5_0 {
  static constexpr int kWeights = kBlock32;
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kBlock32 / 2];
};
struct BlockQ5_1 {
  static constexpr int kWeights = kBlock32;
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[kBlock32 / 2];
};
struct BlockQ8_0 {
  static constexpr int kWeights = kBlock32;
  uint16_t d;
  int8_t qs[kBlock32];
};
struct BlockQ8_1 {
  static constexpr int kWeights = kBlock32;
  uint16_t d, s;
  int8_t qs[kBlock32];
};
struct BlockMXFP4 {
  static constexpr int kWeights = kBlock32;
  uint8_t e;
  uint8_t qs[kBlock32 / 2];
};
struct BlockQ4_K {
  static constexpr int kWeights = kBlock256;
  uint16_t d, dmin;
  uint8_t scales[kScaleBytesK];
  uint8_t qs[kBlock256 / 2];
};
struct BlockQ5_K {
  static constexpr int kWeights = kBlock256;
  uint16_t d, dmin;
  uint8_t scales[kScaleBytesK];
  uint8_t qh[kBlock256 / 8];
  uint8_t qs[kBlock256 / 2];
};
struct BlockQ6_K {
  static constexpr int kWeights = kBlock256;
  uint8_t ql[kBlock256 / 2];
  uint8_t qh[kBlock256 / 4];
  int8_t scales[kBlock256 / 16];
  uint16_t d;
};
struct BlockQ8_K {
  static constexpr int kWeights = kBlock256;
  float d;
  int8_t qs[kBlock256];
  int16_t bsums[kBlock256 / 16];
};

static_assert(sizeof(BlockQ4_0) == dtype_block_bytes(DType::Q4_0));
static_assert(sizeof(BlockQ4_1) == dtype_block_bytes(DType::Q4_1));
static_assert(sizeof(BlockQ5_0) == dtype_block_bytes(DType::Q5_0));
static_assert(sizeof(BlockQ5_1) == dtype_block_bytes(DType::Q5_1));
static_assert(sizeof(BlockQ8_0) == dtype_block_bytes(DType::Q8_0));
static_assert(sizeof(BlockQ8_1) == dtype_block_bytes(DType::Q8_1));
static_assert(sizeof(BlockMXFP4) == dtype_block_bytes(DType::MXFP4));
static_assert(sizeof(BlockQ4_K) == dtype_block_bytes(DType::Q4_K));
static_assert(sizeof(BlockQ5_K) == dtype_block_bytes(DType::Q5_K));
static_assert(sizeof(BlockQ6_K) == dtype_block_bytes(DType::Q6_K));
static_assert(sizeof(BlockQ8_K) == dtype_block_bytes(DType::Q8_K));

// ggml type ids (the numbers in a GGUF tensor table) of the dtypes tokenmill handles.
std::optional<DType> dtype_from_ggml_type(uint32_t ggml_type);  // nullopt: not handled
uint32_t ggml_type_of(DType dtype);

// The activation format a weight type's integer dot product takes (ggml's vec_dot_type):
// Q8_0 for Q4_0, Q5_0, Q8_0, MXFP4; Q8_1 for Q4_1, Q5_1; Q8_K for the k-quants. Plain types
// (f32, bf16, f16) are multiplied with f32 activations and return F32.
DType activation_type(DType weight_type);

}  // namespace tokenmill::quant
