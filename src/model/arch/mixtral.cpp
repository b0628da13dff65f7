// Mixtral (MixtralForCausalLM): the Mistral layer with a mixture of SwiGLU experts for its
// MLP (block_sparse_moe: a router `gate` and experts w1 = gate, w3 = up, w2 = down), the
// chosen experts' weights renormalised. llama.cpp keeps it in "llama" files that have
// llama.expert_count.
#include "model/arch/families.h"

namespace tokenmill {

namespace {

// kLlamaLayout is constant-initialised (string literals only), so it is ready here.
const TensorLayout kMixtralLayout =
    with_experts(kLlamaLayout, "block_sparse_moe.gate", "block_sparse_moe.experts.{}.w1",
                 "block_sparse_moe.experts.{}.w3", "block_sparse_moe.experts.{}.w2");

void read_mixtral_config(const FieldReader& f, ModelConfig& c) {
  read_llama_config(f, c);
  c.sliding_window = f.integer_or("sliding_window", 0, 0, kMaxPositions);
  c.num_experts = f.integer("num_local_experts", 1, kMaxExperts);
  c.experts_per_token = f.integer("num_experts_per_tok", 1, c.num_experts);
  c.expert_intermediate_size = c.intermediate_size;
  c.normalize_expert_weights = true;
  read_router_aux_loss(f, c);
}

}  // namespace

const Architecture kMixtralArchitecture = {"MixtralForCausalLM", "mixtral", "llama", &kMixtralLayout,
                                           read_mixtral_config};

}  // namespace tokenmill
