#include "quant/quant_formats.h"

#include "core/error.h"

namespace tokenmill::quant {

namespace {

struct GgmlId {
  uint32_t id;
  DType dtype;
};

// ggml.h's enum ggml_type, for the types tokenmill reads and writes.
constexpr GgmlId kGgmlIds[] = {
    {0, DType::F32},   {1, DType::F16},   {2, DType::Q4_0},  {3, DType::Q4_1},   {6, DType::Q5_0},
    {7, DType::Q5_1},  {8, DType::Q8_0},  {9, DType::Q8_1},  {12, DType::Q4_K},  {13, DType::Q5_K},
    {14, DType::Q6_K}, {15, DType::Q8_K}, {30, DType::BF16}, {39, DType::MXFP4},
};

}  // namespace

std::optional<DType> dtype_from_ggml_type(uint32_t ggml_type) {
  for (const GgmlId& g : kGgmlIds)
    if (g.id == ggml_type) return g.dtype;
  return std::nullopt;
}

uint32_t ggml_type_of(DType dtype) {
  for (const GgmlId& g : kGgmlIds)
    if (g.dtype == dtype) return g.id;
  fail("{} has no ggml type id", dtype_name(dtype));
}

DType activation_type(DType weight_type) {
  switch (weight_type) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
    case DType::MXFP4: return DType::Q8_0;
    case DType::Q4_1:
    case DType::Q5_1: return DType::Q8_1;
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return DType::Q8_K;
    case DType::Q8_1:
    case DType::Q8_K: fail("{} is an activation format, not a weight type", dtype_name(weight_type));
    default: return DType::F32;
  }
}

}  // namespace tokenmill::quant
