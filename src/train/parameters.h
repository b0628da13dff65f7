// ParameterSet: the trainable f32 copy of a model (FP32 master weights), its gradients and
// its AdamW moments, in flat buffers, with ModelWeights views for the forward/backward.
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

class ParameterSet {
 public:
  // All parameters of `config`'s architecture, zero-filled.
  explicit ParameterSet(const ModelConfig& config);
  ParameterSet(const ParameterSet&) = delete;
  ParameterSet& operator=(const ParameterSet&) = delete;

  // GPT-2 initialisation, seeded (mt19937_64, Box-Muller normals): matrices and embeddings
  // N(0, 0.02), the residual output projections (o, down) N(0, 0.02 / sqrt(2 * layers)),
  // norm weights 1, biases 0.
  void init_gpt2(uint64_t seed);
  // Copies a loaded model's weights (f32, bf16 or f16; quantized types are refused) into
  // the master copy, checking every shape.
  void load(const ModelWeights& source);

  const ModelWeights& weights() const { return weights_; }
  const ModelWeights& grads() const { return grads_; }
  const std::vector<Parameter>& parameters() const { return parameters_; }
  int64_t count() const { return static_cast<int64_t>(values_.size()); }

  std::span<float> values() { return values_; }
  std::span<float> gradients() { return gradients_; }
  std::span<float> first_moments() { return m_; }
  std::span<float> second_moments() { return v_; }
  std::span<const float> values() const { return values_; }
  std::span<const float> first_moments() const { return m_; }
  std::span<const float> second_moments() const { return v_; }
  void zero_grads();

 private:
  ModelConfig config_;
  std::vector<Parameter> parameters_;
  std::vector<float> values_, gradients_, m_, v_;
  ModelWeights weights_, grads_;
};

}  // namespace tokenmill
