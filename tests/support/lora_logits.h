// LoRA tests' references: a model's logits with a PEFT adapter merged into its weights (on the
// CPU, through the single-sequence Transformer), and a comparison with PeftModel's logits.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "backend/backend.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/peft_adapter.h"
#include "model/transformer.h"

namespace tokenmill::testing {

// Every position's logits of `ids` from `model` with `adapter` merged.
inline std::vector<float> merged_lora_logits(const Model& model, const LoraAdapter& adapter,
                                             const std::vector<int32_t>& ids) {
  Model merged;
  merged.config = model.config;
  merged.weights = merge_lora(model.config, model.weights, adapter.weights);
  auto backend = make_cpu_backend();
  Transformer tf(merged, *backend, 16);
  std::vector<float> logits(ids.size() * static_cast<size_t>(model.config.vocab_size));
  tf.forward_all(ids, logits);
  return logits;
}

// got[i] within `tolerance` (relative, plus as much absolute) of want[i], for every i.
inline void expect_logits_near(const std::vector<float>& got, const std::vector<float>& want,
                               float tolerance) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tolerance * (1.0f + std::fabs(want[i]))) << i;
}

}  // namespace tokenmill::testing
