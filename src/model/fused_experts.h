// gpt-oss's experts as Hugging Face stores them: one module per layer ("mlp.experts")
// holding every expert's projections in one tensor each, turned into the engine's stacks
// (LayerWeights::expert_gate, expert_up, expert_down and their biases).
//
// Stored forms, E experts of width I over hidden size H:
//  - plain (f32, bf16, f16): gate_up_proj [E, H, 2I] with gate and up interleaved (column 2j is
//    gate row j, 2j + 1 up row j) and down_proj [E, I, H], both [in, out] per expert: transposed
//    and split into copies of their dtype;
//  - MXFP4 (the released checkpoints, config quantization_config.quant_method "mxfp4"):
//    gate_up_proj_blocks [E, 2I, H / 32, 16] and gate_up_proj_scales [E, 2I, H / 32] (rows
//    interleaved as above), down_proj_blocks [E, H, I / 32, 16] and down_proj_scales
//    [E, H, I / 32], u8 each: block b of a row holds 32 FP4 codes, code 2i in the low nibble
//    of byte i and 2i + 1 in its high nibble, and the scale byte e (the value's power of two is
//    e - 127). They become DType::MXFP4 rows (quant::BlockMXFP4: the same codes, code j < 16
//    in the low nibble of qs[j] and j + 16 in its high nibble, the same e), bit-exact;
//  - and in both, gate_up_proj_bias [E, 2I] (interleaved) and down_proj_bias [E, H], as f32.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "core/tensor_store.h"
#include "formats/safetensors.h"

namespace tokenmill {

struct ExpertStacks {
  Tensor gate, up;                       // [E I, H]
  Tensor down;                           // [E H, I]
  Tensor gate_bias, up_bias, down_bias;  // f32 [E I], [E I], [E H]
};

// The experts of module `module` ("model.layers.3.mlp.experts"), copied into `store`. Errors
// name the tensor and file: a missing tensor, another shape or dtype, a width not a multiple
// of 32 for MXFP4.
ExpertStacks read_fused_experts(const SafetensorsArchive& archive, TensorStore& store,
                                const std::string& module, int64_t experts, int64_t width, int64_t hidden);

}  // namespace tokenmill
