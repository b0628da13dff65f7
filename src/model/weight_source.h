// WeightSource: a file format's tensors by name, as the weight mapping needs them, so one
// mapping per family layout (model/arch/tensor_layout.h) serves both safetensors (Hugging
// Face names) and GGUF (llama.cpp names).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/tensor.h"
#include "model/arch/tensor_layout.h"
#include "model/fused_experts.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace tokenmill {

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual bool has(const std::string& name) const = 0;
  // A [rows, cols] matrix stored as such (embeddings, lm_head, Linear weights), in place in
  // the mapped file; Error naming the tensor if it is missing or has another shape.
  virtual Tensor matrix(const std::string& name, int64_t rows, int64_t cols) const = 0;
  // A Linear weight [out, in] in the engine's layout; a format that stores it [in, out]
  // (GPT-2's Hugging Face Conv1D) returns a transposed copy.
  virtual Tensor linear(const std::string& name, int64_t out, int64_t in) const {
    return matrix(name, out, in);
  }
  // The matrices [rows, cols] of `count` experts as one [count * rows, cols] tensor, expert e's
  // rows after expert e - 1's (LayerWeights::expert_gate). `name` has a {} for the expert
  // index where the format keeps a tensor per expert (Hugging Face: then they are copied
  // together, and must share a dtype).
  virtual Tensor experts(const std::string& name, int64_t count, int64_t rows, int64_t cols) const = 0;
  // The biases [rows] of `count` experts as one f32 [count * rows] vector, expert e's after
  // expert e - 1's; `name` as for experts().
  virtual Tensor expert_biases(const std::string& name, int64_t count, int64_t rows) const = 0;
  // A [n] vector (norm weight, bias) converted to f32.
  virtual Tensor vector_f32(const std::string& name, int64_t n) const = 0;
  // Experts kept as one module of fused tensors (TensorLayout::hf_fused_experts): only a
  // format that stores them so has them (Error otherwise).
  virtual ExpertStacks fused_experts(const std::string& module, int64_t count, int64_t width,
                                     int64_t hidden) const;
};

// The matrices expert(0) ... expert(count - 1) ([rows, cols] each, one dtype) copied into one
// [count * rows, cols] tensor of `store`, expert e's rows after expert e - 1's (what
// WeightSource::experts returns where a format keeps one tensor per expert), after checking
// that host memory has room for it (check_room_for). `names` gives expert e's tensor name for
// errors.
Tensor stack_experts(TensorStore& store, int64_t count, const std::function<Tensor(int64_t)>& expert,
                     const std::function<std::string(int64_t)>& names);

// Maps every tensor of `config`'s family from `source`, whose names are `format`'s, onto
// `out`, checking every shape against `config`; lm_head is the token embedding when tied.
// A Hugging Face GPT-2 checkpoint may carry the "transformer." prefix or not.
void load_layout_weights(const ModelConfig& config, const WeightSource& source, WeightFormat format,
                         ModelWeights& out);

}  // namespace tokenmill
