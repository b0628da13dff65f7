// The f32 activations a backend's matmul multiplies, for the reference to read the same
// values: a backend that rounds them to the weights' dtype (BackendUnderTest::
// rounds_matmul_activations: x in matmul, dy in matmul_backward's dx = dy . w) over bf16/f16
// weights multiplies the rounded values, exactly (products of two bf16/f16 values are exact
// in f32), and sums in f32: the suite's kF32 tolerance stays.
#pragma once

#include <cstdint>
#include <vector>

#include "conformance_harness.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace tokenmill::testing {

class MatmulActivations {
 public:
  // `activations` (f32) as `backend` reads them in a product with `weight_dtype` weights.
  MatmulActivations(const BackendUnderTest& backend, const GuardedBuffer& activations, DType weight_dtype)
      : tensor_(activations.tensor()) {
    if (!backend.rounds_matmul_activations || weight_dtype == DType::F32) return;
    rounded_ = activations.values();
    for (float& v : rounded_) {
      uint32_t bits = 0;
      store_from_f32(&bits, weight_dtype, 0, v);
      v = load_as_f32(&bits, weight_dtype, 0);
    }
    tensor_.data = rounded_.data();
  }
  MatmulActivations(const MatmulActivations&) = delete;  // tensor_ may point into rounded_
  MatmulActivations& operator=(const MatmulActivations&) = delete;

  const Tensor& tensor() const { return tensor_; }

 private:
  std::vector<float> rounded_;
  Tensor tensor_;
};

}  // namespace tokenmill::testing
