// WeightSource: a file format's tensors by name, as the weight mapping needs them, so one
// mapping of the Llama family serves both safetensors (Hugging Face names) and GGUF
// (llama.cpp names); only the names differ (LlamaTensorNames).
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace tokenmill {

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual bool has(const std::string& name) const = 0;
  // A [rows, cols] weight matrix, in place in the mapped file; Error naming the tensor if
  // it is missing or has another shape.
  virtual Tensor matrix(const std::string& name, int64_t rows, int64_t cols) const = 0;
  // A [n] vector (norm weight, bias) converted to f32.
  virtual Tensor vector_f32(const std::string& name, int64_t n) const = 0;
};

// Where a format keeps each tensor of a Llama-family model. Per-layer names are
// `layer_prefix` with {} replaced by the layer index, followed by the projection's name
// and ".weight" / ".bias".
struct LlamaTensorNames {
  std::string token_embedding, final_norm, lm_head;  // full names
  std::string layer_prefix;                          // "model.layers.{}." | "blk.{}."
  std::string attn_norm, q, k, v, o, mlp_norm, gate, up, down;
};

extern const LlamaTensorNames kHuggingFaceLlamaNames;
extern const LlamaTensorNames kGgufLlamaNames;

// Llama, Mistral, Qwen2 (and SmolLM): RMSNorm, SwiGLU, GQA, optional biases per `config`.
// Sets every field of `out` but lm_head.
void load_llama_family(const ModelConfig& config, const WeightSource& source, const LlamaTensorNames& names,
                       ModelWeights& out);

}  // namespace tokenmill
