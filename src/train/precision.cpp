#include "train/precision.h"

#include "core/error.h"

namespace tokenmill {

Precision parse_precision(std::string_view name, std::string_view flag) {
  if (name == "fp32") return Precision::FP32;
  if (name == "bf16") return Precision::BF16;
  if (name == "fp16") return Precision::FP16;
  fail("{}: unknown precision '{}'; choose fp32, bf16 or fp16", flag, name);
}

std::string_view precision_name(Precision precision) {
  switch (precision) {
    case Precision::BF16: return "bf16";
    case Precision::FP16: return "fp16";
    case Precision::FP32: break;
  }
  return "fp32";
}

DType compute_dtype(Precision precision) {
  switch (precision) {
    case Precision::BF16: return DType::BF16;
    case Precision::FP16: return DType::F16;
    case Precision::FP32: break;
  }
  return DType::F32;
}

}  // namespace tokenmill
