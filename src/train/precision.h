// The training precision policy (TrainOptions::precision, `tokenmill train --precision`).
//
//  - fp32: FP32 weights, math, gradients and AdamW state everywhere.
//  - bf16, fp16: FP32 master weights, gradients and AdamW state (what the optimizer steps and
//    checkpoints hold); the forward and backward multiply with a bf16 / fp16 copy of every
//    matrix (q, k, v, o, gate, up, down and the lm_head, tied or not: train/compute_weights.h),
//    rounded from the master after every applied optimizer step, as torch.autocast rounds the
//    weights of each linear layer. Embedding lookups, norms, biases, attention, the softmax and
//    the loss stay FP32. What a product then computes is the backend's matmul over that weight
//    dtype (backend/backend.h): the CUDA backend rounds the activations (and dy, for dx) to it
//    too and runs the tensor-core GEMM with FP32 sums, dW in FP32; the CPU backend widens the
//    weights to f32 and computes in f32 (AVX2 has no bf16/fp16 arithmetic).
//  - fp16 also scales the loss dynamically (train/loss_scaler.h, PyTorch's GradScaler
//    defaults): small gradients survive the fp16 rounding of dy, and a step whose gradients
//    overflow is skipped while the scale backs off.
#pragma once

#include <string_view>

#include "core/dtype.h"

namespace tokenmill {

enum class Precision : uint8_t { FP32, BF16, FP16 };

// "fp32" | "bf16" | "fp16"; anything else is an Error naming `flag` and the choices.
Precision parse_precision(std::string_view name, std::string_view flag = "--precision");
std::string_view precision_name(Precision precision);
// The dtype of the matrices' compute copy: F32 (no copy), BF16 or F16.
DType compute_dtype(Precision precision);

}  // namespace tokenmill
