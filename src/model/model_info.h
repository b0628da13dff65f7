// ModelInfo: what `tokenmill info` reports about a loaded model.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "model/model.h"

namespace tokenmill {

struct ModelInfo {
  std::string path;
  std::string architecture;
  std::string model_type;
  int64_t parameters = 0;
  std::map<std::string, uint64_t> weight_bytes_by_dtype;  // as stored in the files
  uint64_t weight_bytes = 0;
  int64_t context_length = 0;
  int64_t layers = 0, hidden_size = 0, intermediate_size = 0, experts = 0, experts_per_token = 0, heads = 0,
          kv_heads = 0, head_dim = 0, vocab_size = 0;
  int64_t sliding_window = 0, sliding_layers = 0;                  // the window, and how many layers slide
  double attn_logit_softcapping = 0, final_logit_softcapping = 0;  // 0: none
  bool tied_embeddings = false;
  std::string norm, mlp, positions, rope_scaling;
  std::string kv_cache_dtype;             // "f32" or "f16" (Model::default_kv_dtype)
  uint64_t kv_cache_bytes_per_token = 0;  // K and V over all layers
};

ModelInfo describe(const Model& model);
nlohmann::json to_json(const ModelInfo& info);
std::string to_text(const ModelInfo& info);

}  // namespace tokenmill
