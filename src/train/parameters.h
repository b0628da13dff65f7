// ParameterBuffers: trainable f32 tensors (FP32 master weights), their gradients and their
// AdamW moments, in flat buffers: what the optimizer steps and checkpoints store.
// ParameterSet: the whole model as ParameterBuffers, with ModelWeights views for the
// forward/backward (full fine-tuning and training from scratch; train/lora_parameters.h
// holds a LoRA adapter instead).
//
// Every parameter has an engine name ("token_embedding", "layers.3.q", "layers.3.q_bias",
// "final_norm_weight", "lm_head", ...; checkpoints use them) and a weight-decay flag:
// decay applies to the 2-D matrices of the layers and the untied lm_head; never to
// embeddings, norm weights or biases (the usual GPT-2 / nanoGPT / llm.c policy).
// A tied lm_head is the token embedding itself in both views (no separate parameter).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/weights.h"

namespace tokenmill {

struct Parameter {
  std::string name;
  std::vector<int64_t> shape;
  bool decay = false;
  int64_t offset = 0;  // into the flat buffers, in floats
  int64_t numel = 0;
};

class ParameterBuffers {
 public:
  ParameterBuffers(const ParameterBuffers&) = delete;
  ParameterBuffers& operator=(const ParameterBuffers&) = delete;
  virtual ~ParameterBuffers() = default;

  const std::vector<Parameter>& parameters() const { return parameters_; }
  int64_t count() const { return static_cast<int64_t>(values_.size()); }

  std::span<float> values() { return values_; }
  std::span<float> gradients() { return gradients_; }
  std::span<float> first_moments() { return m_; }
  std::span<float> second_moments() { return v_; }
  std::span<const float> values() const { return values_; }
  std::span<const float> gradients() const { return gradients_; }
  std::span<const float> first_moments() const { return m_; }
  std::span<const float> second_moments() const { return v_; }
  void zero_grads();

 protected:
  // Zero-filled buffers for `parameters` (name, shape, decay given; offsets and numel are
  // assigned here, in order).
  explicit ParameterBuffers(std::vector<Parameter> parameters);
  // A parameter's values or gradients as a [n] or [rows, cols] tensor.
  Tensor value_view(const Parameter& p) { return view(values_, p); }
  Tensor gradient_view(const Parameter& p) { return view(gradients_, p); }

 private:
  static Tensor view(std::vector<float>& buffer, const Parameter& p);

  std::vector<Parameter> parameters_;
  std::vector<float> values_, gradients_, m_, v_;
};

class ParameterSet : public ParameterBuffers {
 public:
  // All parameters of `config`'s architecture, zero-filled.
  explicit ParameterSet(const ModelConfig& config);

  // GPT-2 initialisation, seeded (mt19937_64, Box-Muller normals): matrices and embeddings
  // N(0, 0.02), the residual output projections (o, down) N(0, 0.02 / sqrt(2 * layers)),
  // norm weights 1, biases 0.
  void init_gpt2(uint64_t seed);
  // Copies a loaded model's weights (f32, bf16 or f16; quantized types are refused) into
  // the master copy, checking every shape.
  void load(const ModelWeights& source);

  const ModelWeights& weights() const { return weights_; }
  const ModelWeights& grads() const { return grads_; }

 private:
  ModelConfig config_;
  ModelWeights weights_, grads_;
};

}  // namespace tokenmill
