#include "model/weights.h"

#include <string>

#include <fmt/format.h>

#include "core/transpose.h"
#include "model/weight_source.h"

namespace tokenmill {

namespace {

class SafetensorsSource final : public WeightSource {
 public:
  SafetensorsSource(const SafetensorsArchive& archive, TensorStore& store)
      : archive_(archive), store_(store) {}

  bool has(const std::string& name) const override { return archive_.contains(name); }

  Tensor matrix(const std::string& name, int64_t rows, int64_t cols) const override {
    return archive_.tensor(name, {rows, cols});
  }

  Tensor vector_f32(const std::string& name, int64_t n) const override {
    const Tensor stored = archive_.tensor(name, {n});
    Tensor out = store_.allocate(DType::F32, {n});
    for (int64_t i = 0; i < n; ++i)
      out.as<float>()[i] = load_as_f32(stored.data, stored.dtype, static_cast<size_t>(i));
    return out;
  }

  // A Conv1D weight stored [in, out], returned as [out, in] in its own dtype.
  Tensor transposed(const std::string& name, int64_t in, int64_t out) const {
    const Tensor stored = archive_.tensor(name, {in, out});
    Tensor t = store_.allocate(stored.dtype, {out, in});
    transpose(stored.data, in, out, dtype_size(stored.dtype), t.data);
    return t;
  }

 private:
  const SafetensorsArchive& archive_;
  TensorStore& store_;
};

void load_gpt2(const ModelConfig& c, const SafetensorsSource& w, ModelWeights& out) {
  const std::string p = w.has("transformer.wte.weight") ? "transformer." : "";
  const int64_t d = c.hidden_size;
  const int64_t ff = c.intermediate_size;
  out.token_embedding = w.matrix(p + "wte.weight", c.vocab_size, d);
  out.position_embedding = w.matrix(p + "wpe.weight", c.max_position_embeddings, d);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string l = fmt::format("{}h.{}.", p, i);
    LayerWeights& layer = out.layers.emplace_back();
    layer.attn_norm_weight = w.vector_f32(l + "ln_1.weight", d);
    layer.attn_norm_bias = w.vector_f32(l + "ln_1.bias", d);
    // c_attn maps d -> 3d as [q | k | v]; after transposing, its rows are q, k, v.
    const Tensor qkv = w.transposed(l + "attn.c_attn.weight", d, 3 * d);
    const Tensor qkv_bias = w.vector_f32(l + "attn.c_attn.bias", 3 * d);
    layer.q = qkv.slice_rows(0, d);
    layer.k = qkv.slice_rows(d, d);
    layer.v = qkv.slice_rows(2 * d, d);
    layer.q_bias = qkv_bias.slice_rows(0, d);
    layer.k_bias = qkv_bias.slice_rows(d, d);
    layer.v_bias = qkv_bias.slice_rows(2 * d, d);
    layer.o = w.transposed(l + "attn.c_proj.weight", d, d);
    layer.o_bias = w.vector_f32(l + "attn.c_proj.bias", d);
    layer.mlp_norm_weight = w.vector_f32(l + "ln_2.weight", d);
    layer.mlp_norm_bias = w.vector_f32(l + "ln_2.bias", d);
    layer.up = w.transposed(l + "mlp.c_fc.weight", d, ff);
    layer.up_bias = w.vector_f32(l + "mlp.c_fc.bias", ff);
    layer.down = w.transposed(l + "mlp.c_proj.weight", ff, d);
    layer.down_bias = w.vector_f32(l + "mlp.c_proj.bias", d);
  }
  out.final_norm_weight = w.vector_f32(p + "ln_f.weight", d);
  out.final_norm_bias = w.vector_f32(p + "ln_f.bias", d);
  out.lm_head = c.tie_word_embeddings ? out.token_embedding : w.matrix("lm_head.weight", c.vocab_size, d);
}

}  // namespace

void load_weights(const ModelConfig& config, const SafetensorsArchive& archive, ModelWeights& weights) {
  const SafetensorsSource source(archive, weights.owned);
  weights.layers.reserve(static_cast<size_t>(config.num_hidden_layers));
  if (config.model_type == "gpt2") {
    load_gpt2(config, source, weights);
  } else {
    load_llama_family(config, source, kHuggingFaceLlamaNames, weights);
    weights.lm_head = config.tie_word_embeddings ? weights.token_embedding
                                                 : source.matrix(kHuggingFaceLlamaNames.lm_head,
                                                                 config.vocab_size, config.hidden_size);
  }
}

ModelWeights view_weights(const ModelWeights& w) {
  ModelWeights v;
  v.token_embedding = w.token_embedding;
  v.position_embedding = w.position_embedding;
  v.layers = w.layers;
  v.final_norm_weight = w.final_norm_weight;
  v.final_norm_bias = w.final_norm_bias;
  v.lm_head = w.lm_head;
  v.rope_freq_factors = w.rope_freq_factors;
  v.memory = w.memory;
  return v;
}

}  // namespace tokenmill
