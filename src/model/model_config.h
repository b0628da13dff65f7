// ModelConfig: the hyper-parameters of a decoder-only transformer, read from a Hugging
// Face `config.json` (field names mirror it) plus `generation_config.json`.
//
// The forward pass is driven entirely by this struct: which norm, which activation,
// learned or rotary positions, GQA, biases, q/k norms, pre- or post-norms, tied embeddings.
// Supported architectures: model/arch/architecture.cpp lists them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "backend/backend.h"

namespace tokenmill {

enum class NormKind : uint8_t { LayerNorm, RmsNorm };
// GeGlu: gelu_tanh(h W_gate) * h W_up, then W_down (Gemma), SwiGlu's shape.
enum class MlpKind : uint8_t { GeluTanh, GeluErf, SwiGlu, GeGlu };
// Whether the MLP has a gate projection (act(h W_gate) * h W_up).
inline bool gated_mlp(MlpKind kind) { return kind == MlpKind::SwiGlu || kind == MlpKind::GeGlu; }
enum class PositionKind : uint8_t { Learned, Rotary };
enum class QkNorm : uint8_t { None, PerHead, Whole };

struct RopeScaling {
  std::string rope_type = "default";  // default | linear | llama3 | yarn | longrope
  double factor = 1.0;
  double low_freq_factor = 1.0;                  // llama3
  double high_freq_factor = 4.0;                 // llama3
  int64_t original_max_position_embeddings = 0;  // llama3, yarn, longrope
  double beta_fast = 32.0, beta_slow = 1.0;      // yarn: the ramp's bounds, in rotations
  bool truncate = true;                          // yarn: the ramp's bounds rounded to whole dimensions
  // longrope (Phi-3.5, Phi-4-mini): rotary pair j's frequency is divided by short_factor[j],
  // or by long_factor[j] in a run whose context exceeds original_max_position_embeddings
  // (model/rope.h); [rotary_dim / 2] each.
  std::vector<float> short_factor, long_factor;
  // yarn, longrope: cos and sin are multiplied by this (transformers' attention_factor; by
  // default 0.1 ln(factor) + 1 for yarn, sqrt(1 + ln(factor) / ln(original context)) for
  // longrope), so every q . k by its square; 1 for the other types.
  double attention_factor = 1.0;
};

// Sampling defaults a model ships in generation_config.json (absent fields stay unset).
struct GenerationDefaults {
  std::optional<bool> do_sample;
  std::optional<double> temperature;
  std::optional<int64_t> top_k;
  std::optional<double> top_p;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
};

struct ModelConfig {
  std::string architecture;  // as in "architectures"[0], e.g. "LlamaForCausalLM"
  std::string model_type;    // "gpt2", "llama", "mistral", "qwen2", "qwen3", "mixtral", ...

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  // The elements at the start of each head that RoPE rotates, the rest passing through
  // (Phi-4-mini rotates three quarters): int(head_dim * partial_rotary_factor) from
  // config.json, rope.dimension_count from GGUF. Even; 0 without rotary positions.
  int64_t rotary_dim = 0;
  int64_t max_position_embeddings = 0;
  // Mistral, Gemma: tokens attend to at most this many latest positions, themselves
  // included (0 = unlimited), in the layers sliding_layer() names.
  int64_t sliding_window = 0;
  // Gemma: which layers slide (layer_types' "sliding_attention"); the others attend to every
  // position. Empty: every layer, when sliding_window > 0 (Mistral).
  std::vector<bool> sliding_layers;
  // Gemma 3: the RoPE base of the sliding layers, which take no rope_scaling (0: they rotate
  // as the other layers do).
  double sliding_rope_theta = 0;
  // Gemma: the attention scores are scaled by query_pre_attn_scalar^-1/2 rather than
  // head_dim^-1/2 (0: head_dim's).
  double query_pre_attn_scalar = 0;
  // Gemma 2: attention scores soft-capped as cap * tanh(score / cap), and the final logits
  // likewise (0: none).
  double attn_logit_softcapping = 0;
  double final_logit_softcapping = 0;
  // gpt-oss: each attention head has a learned sink logit (the layer's attn_sinks) in its
  // softmax's denominator (Backend::AttentionScores).
  bool attention_sinks = false;

  NormKind norm = NormKind::RmsNorm;
  double norm_eps = 1e-5;
  MlpKind mlp = MlpKind::SwiGlu;
  PositionKind positions = PositionKind::Rotary;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  // Which elements rotate together: Hugging Face's rotate_half halves (Neox), or adjacent
  // pairs for GGUF llama files, whose q/k rows the converter permuted (Interleaved).
  RopeLayout rope_layout = RopeLayout::Neox;

  bool attention_qkv_bias = false;  // Qwen2, GPT-2, Llama's attention_bias
  bool attention_out_bias = false;  // GPT-2, Llama's attention_bias
  // GPT-2, Llama's mlp_bias; with experts (gpt-oss), biases on the router and on every
  // expert's gate, up and down projections.
  bool mlp_bias = false;
  // RMSNorm (norm_eps) of q and of k before RoPE: Qwen3 over each head (weights [head_dim]),
  // OLMo 2 over the whole projection (weights [heads * head_dim], [kv_heads * head_dim]).
  QkNorm qk_norm = QkNorm::None;
  // OLMo 2: no norm before attention and MLP; each one's output is RMS-normalised (the
  // layer's attn_norm / mlp_norm weights) before the residual add.
  bool post_norms = false;
  // Gemma: norms both before and after attention and MLP (the layer's attn_norm / mlp_norm
  // before, attn_post_norm / mlp_post_norm on each block's output before the residual add).
  bool sandwich_norms = false;
  // Gemma: RMSNorm multiplies by (1 + weight); its checkpoints store `weight`, which the
  // loader turns into 1 + weight (as llama.cpp's GGUF files already hold it).
  bool norm_weight_offset = false;
  // Gemma: the token embeddings are multiplied by sqrt(hidden_size).
  bool scale_embeddings = false;
  bool tie_word_embeddings = false;

  // Mixture of experts (Mixtral, Qwen3-MoE): every layer's MLP is num_experts SwiGLU experts
  // of width expert_intermediate_size. A router (a Linear [num_experts, hidden], no bias)
  // scores them per token; the token runs the experts_per_token best-scored ones (ties to the
  // lower index) and sums their outputs weighted by the softmax of the scores over all
  // experts, renormalised to sum to 1 over the chosen ones when normalize_expert_weights
  // (then equal to the softmax over the chosen scores alone, Mixtral's form). No experts
  // (num_experts = 0): a dense MLP of width intermediate_size.
  int64_t num_experts = 0;
  int64_t experts_per_token = 0;
  int64_t expert_intermediate_size = 0;
  bool normalize_expert_weights = true;
  // gpt-oss: the experts' SwiGLU is clamped (Backend::clamped_swiglu with these) when
  // swiglu_limit > 0; 0: silu(gate) * up.
  double swiglu_alpha = 0.0, swiglu_limit = 0.0;
  // Training a mixture of experts adds router_aux_loss_coef x transformers' load-balancing loss
  // (model/router_gradient.h) when config.json asks for it (output_router_logits); 0: none.
  double router_aux_loss_coef = 0.0;

  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;  // generation_config.json's, else config.json's
  GenerationDefaults generation;

  // Longest sequence the engine will run: max_position_embeddings (sliding windows are run
  // by the attention kernels, not by a shorter context).
  int64_t context_length() const;
  // The widths q_norm and k_norm normalise (and their weights' sizes); 0 without q/k norms.
  int64_t q_norm_width() const {
    return qk_norm == QkNorm::None      ? 0
           : qk_norm == QkNorm::PerHead ? head_dim
                                        : num_attention_heads * head_dim;
  }
  int64_t k_norm_width() const {
    return qk_norm == QkNorm::None      ? 0
           : qk_norm == QkNorm::PerHead ? head_dim
                                        : num_key_value_heads * head_dim;
  }
  bool mixture_of_experts() const { return num_experts > 0; }
  // The width of a token's MLP activations: intermediate_size, or an expert's
  // (expert_intermediate_size; a Qwen3-MoE's intermediate_size belongs to no layer it runs).
  int64_t mlp_width() const { return mixture_of_experts() ? expert_intermediate_size : intermediate_size; }
  // The positions a query sees at most, itself included, in every layer: the sliding window
  // when every layer slides (Mistral, Phi-3-mini), else 0 (no bound).
  int64_t attention_span() const;
  // Whether layer `layer` attends through the sliding window.
  bool sliding_layer(int64_t layer) const {
    return sliding_window > 0 && (sliding_layers.empty() || sliding_layers[static_cast<size_t>(layer)]);
  }
  // The attention scores of layer `layer`: scale, window and soft cap (Backend::AttentionScores).
  AttentionScores attention_scores(int64_t layer) const;
  // Whether layer `layer` rotates by the sliding layers' own plain RoPE (sliding_rope_theta).
  bool sliding_rope(int64_t layer) const;
  // What RoPE multiplies layer `layer`'s rotated q and k elements by (Backend::rope): the
  // rope_scaling's attention factor, 1 in layers of their own plain RoPE.
  float rope_magnitude(int64_t layer) const;
  // Floats of K and V cached per token over all layers.
  int64_t kv_floats_per_token() const { return 2 * num_hidden_layers * num_key_value_heads * head_dim; }
};

// Parses a config.json object; `source` names the file in errors. Validates every field
// (positive sizes, heads dividing the width, kv heads dividing heads, known activation,
// known rope_scaling type) and throws tokenmill::Error naming the field on a defect.
ModelConfig parse_model_config(const nlohmann::json& config, const std::string& source);

// Rotary models: rotary_dim even, within the head, and LongRoPE's factor lists of
// rotary_dim / 2 values; throws tokenmill::Error naming `source` otherwise.
void check_rotary(const ModelConfig& config, const std::string& source);

// Merges generation_config.json (eos ids, sampling defaults) into `config`.
void apply_generation_config(const nlohmann::json& generation, const std::string& source,
                             ModelConfig& config);

// Reads dir/config.json and, if present, dir/generation_config.json.
ModelConfig load_model_config(const std::filesystem::path& dir);

}  // namespace tokenmill
