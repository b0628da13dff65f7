// LoraParameters: a LoRA adapter (model/lora.h) as trainable ParameterBuffers, with the
// LoraWeights views of its values and gradients that the TrainingPass reads and writes.
//
// Parameters, per layer and target, in kLoraTargets order: "layers.<i>.<target>.lora_A"
// [rank, in] and "layers.<i>.<target>.lora_B" [out, rank]; both decayed (2-D matrices;
// decay pulls the adapter towards the base model).
#pragma once

#include <cstdint>

#include "model/lora.h"
#include "model/model_config.h"
#include "train/parameters.h"

namespace tokenmill {

class LoraParameters : public ParameterBuffers {
 public:
  // Zero-filled, in `backend`'s memory (host memory when null). Throws Error if `lora` does
  // not fit `config` (check_lora_config).
  LoraParameters(const ModelConfig& config, const LoraConfig& lora, Backend* backend = nullptr,
                 MomentShard shard = {});

  // PEFT's default initialisation (init_lora_weights=True): A by
  // torch.nn.init.kaiming_uniform_(a=sqrt(5)), i.e. uniform(-1/sqrt(in), 1/sqrt(in)) (gain
  // sqrt(2 / (1 + 5)), bound gain * sqrt(3 / in)); B = 0, so the adapted model starts
  // equal to the base model. Seeded (mt19937_64), portable.
  void init(uint64_t seed);

  const LoraConfig& lora() const { return lora_; }
  const LoraWeights& weights() const { return weights_; }
  const LoraWeights& grads() const { return grads_; }

 private:
  LoraConfig lora_;
  LoraWeights weights_, grads_;
};

}  // namespace tokenmill
