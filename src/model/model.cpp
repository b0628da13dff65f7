#include "model/model.h"

namespace tokenmill {

std::unique_ptr<Model> Model::load(const std::filesystem::path& dir) {
  auto model = std::make_unique<Model>();
  model->dir = dir;
  model->config = load_model_config(dir);
  model->archive = SafetensorsArchive::open(dir);
  load_weights(model->config, model->archive, model->weights);
  return model;
}

int64_t Model::parameter_count() const {
  const auto count = [](const Tensor& t) { return t.data != nullptr ? t.numel() : 0; };
  const ModelWeights& w = weights;
  int64_t n = count(w.token_embedding) + count(w.position_embedding) + count(w.final_norm_weight) +
              count(w.final_norm_bias);
  if (w.lm_head.data != w.token_embedding.data) n += count(w.lm_head);
  for (const LayerWeights& l : w.layers) {
    for (const Tensor* t : {&l.attn_norm_weight, &l.attn_norm_bias, &l.q, &l.k, &l.v, &l.o, &l.q_bias,
                            &l.k_bias, &l.v_bias, &l.o_bias, &l.mlp_norm_weight, &l.mlp_norm_bias, &l.gate,
                            &l.gate_bias, &l.up, &l.up_bias, &l.down, &l.down_bias})
      n += count(*t);
  }
  return n;
}

}  // namespace tokenmill
