#include "measure/flops.h"

#include <algorithm>

#include "core/error.h"

namespace tokenmill {

namespace {

// Matrices of one MLP: up and down, plus gate for SwiGLU and GeGLU.
int64_t mlp_matrices(const ModelConfig& c) { return gated_mlp(c.mlp) ? 3 : 2; }

// One layer's matrix parameters: q, k, v, o, the router, and `mlps` MLPs (a dense layer's
// one, or experts: all of them, or the k a token runs).
int64_t layer_matrix_parameters(const ModelConfig& c, int64_t mlps) {
  const int64_t q_width = c.num_attention_heads * c.head_dim;
  const int64_t kv_width = c.num_key_value_heads * c.head_dim;
  return c.hidden_size * q_width + 2 * c.hidden_size * kv_width + q_width * c.hidden_size +
         c.num_experts * c.hidden_size + mlps * mlp_matrices(c) * c.hidden_size * c.mlp_width();
}

// Multiply-adds per token of one layer's weight matmuls.
int64_t layer_matmul_parameters(const ModelConfig& c) {
  return layer_matrix_parameters(c, c.mixture_of_experts() ? c.experts_per_token : 1);
}

// Norm parameters: weight, plus bias for LayerNorm.
int64_t norm_parameters(const ModelConfig& c) {
  return (c.norm == NormKind::LayerNorm ? 2 : 1) * c.hidden_size;
}

int64_t layer_bias_parameters(const ModelConfig& c) {
  int64_t n = 0;
  if (c.attention_qkv_bias) n += (c.num_attention_heads + 2 * c.num_key_value_heads) * c.head_dim;
  if (c.attention_out_bias) n += c.hidden_size;
  if (c.mlp_bias) n += (mlp_matrices(c) - 1) * c.intermediate_size + c.hidden_size;
  return n;
}

}  // namespace

int64_t parameter_count(const ModelConfig& c) {
  const int64_t embedding = c.vocab_size * c.hidden_size;
  const int64_t positions =
      c.positions == PositionKind::Learned ? c.max_position_embeddings * c.hidden_size : 0;
  const int64_t head_norms = c.q_norm_width() + c.k_norm_width();
  const int64_t layer = layer_matrix_parameters(c, std::max<int64_t>(1, c.num_experts)) +
                        layer_bias_parameters(c) + (c.sandwich_norms ? 4 : 2) * norm_parameters(c) +
                        head_norms;
  const int64_t lm_head = c.tie_word_embeddings ? 0 : embedding;
  return embedding + positions + c.num_hidden_layers * layer + norm_parameters(c) + lm_head;
}

int64_t matmul_parameters(const ModelConfig& c) {
  return c.num_hidden_layers * layer_matmul_parameters(c) + c.hidden_size * c.vocab_size;
}

int64_t attended_positions(int64_t first_position, int64_t tokens, int64_t window) {
  // sum_{p = first}^{first + tokens - 1} (p + 1) = tokens * (2 first + tokens + 1) / 2
  const auto causal = [](int64_t first, int64_t count) { return count * (2 * first + count + 1) / 2; };
  if (window <= 0 || first_position + tokens <= window) return causal(first_position, tokens);
  // Positions p < window - 1 attend p + 1 positions, the rest w each.
  const int64_t growing = std::clamp<int64_t>(window - 1 - first_position, 0, tokens);
  return causal(first_position, growing) + (tokens - growing) * window;
}

double forward_flops(const ModelConfig& c, int64_t first_position, int64_t tokens, int64_t logits_rows) {
  const int64_t layers = c.num_hidden_layers * layer_matmul_parameters(c) * tokens;
  const int64_t lm_head = c.hidden_size * c.vocab_size * logits_rows;
  int64_t attended = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    attended += attended_positions(first_position, tokens, c.attention_scores(l).window);
  const int64_t attention = 2 * c.num_attention_heads * c.head_dim * attended;
  return 2.0 * static_cast<double>(layers + lm_head + attention);
}

double training_flops(const ModelConfig& c, int64_t tokens) {
  return 3.0 * forward_flops(c, 0, tokens, tokens);
}

double mfu(double achieved_flops_per_s, double peak_flops_per_s) {
  if (!(peak_flops_per_s > 0)) fail("MFU needs a positive peak FLOP/s, got {}", peak_flops_per_s);
  return achieved_flops_per_s / peak_flops_per_s;
}

}  // namespace tokenmill
