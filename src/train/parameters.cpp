#include "train/parameters.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <type_traits>

#include "core/dtype.h"
#include "core/error.h"

namespace tokenmill {

namespace {

enum class Init : uint8_t { Normal, Residual, One, Zero };

// Visits every parameter slot of `w` (ModelWeights, const or not) for `config`, in a fixed
// order, as visit(slot, name, shape, decay, init): the one list that the layout, both views,
// the initialisation and loading come from.
template <class Weights, class Visit>
void visit_slots(const ModelConfig& c, Weights& w, const Visit& visit) {
  const int64_t hidden = c.hidden_size, ff = c.intermediate_size;
  const int64_t q_width = c.num_attention_heads * c.head_dim, kv_width = c.num_key_value_heads * c.head_dim;
  const bool layer_norm = c.norm == NormKind::LayerNorm;
  visit(w.token_embedding, "token_embedding", {c.vocab_size, hidden}, false, Init::Normal);
  if (c.positions == PositionKind::Learned)
    visit(w.position_embedding, "position_embedding", {c.max_position_embeddings, hidden}, false,
          Init::Normal);
  if constexpr (std::is_const_v<Weights>) {
    if (static_cast<int64_t>(w.layers.size()) != c.num_hidden_layers)
      fail("training: the model has {} layers, the configuration {}", w.layers.size(), c.num_hidden_layers);
  } else {
    w.layers.resize(static_cast<size_t>(c.num_hidden_layers));
  }
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    auto& l = w.layers[static_cast<size_t>(i)];
    const std::string p = "layers." + std::to_string(i) + ".";
    const auto norm = [&](auto& weight, auto& bias, const std::string& name) {
      visit(weight, p + name + "_weight", {hidden}, false, Init::One);
      if (layer_norm) visit(bias, p + name + "_bias", {hidden}, false, Init::Zero);
    };
    const auto linear = [&](auto& weight, auto& bias, const std::string& name, int64_t out, int64_t in,
                            bool has_bias, Init init) {
      visit(weight, p + name, {out, in}, true, init);
      if (has_bias) visit(bias, p + name + "_bias", {out}, false, Init::Zero);
    };
    norm(l.attn_norm_weight, l.attn_norm_bias, "attn_norm");
    linear(l.q, l.q_bias, "q", q_width, hidden, c.attention_qkv_bias, Init::Normal);
    linear(l.k, l.k_bias, "k", kv_width, hidden, c.attention_qkv_bias, Init::Normal);
    linear(l.v, l.v_bias, "v", kv_width, hidden, c.attention_qkv_bias, Init::Normal);
    if (c.qk_norm != QkNorm::None) {
      visit(l.q_norm_weight, p + "q_norm_weight", {c.q_norm_width()}, false, Init::One);
      visit(l.k_norm_weight, p + "k_norm_weight", {c.k_norm_width()}, false, Init::One);
    }
    linear(l.o, l.o_bias, "o", hidden, q_width, c.attention_out_bias, Init::Residual);
    if (c.sandwich_norms)
      visit(l.attn_post_norm_weight, p + "attn_post_norm_weight", {hidden}, false, Init::One);
    norm(l.mlp_norm_weight, l.mlp_norm_bias, "mlp_norm");
    if (c.mixture_of_experts()) {  // the experts' matrices stacked (model/weights.h)
      const int64_t experts = c.num_experts, width = c.expert_intermediate_size;
      visit(l.router, p + "router", {experts, hidden}, true, Init::Normal);
      visit(l.expert_gate, p + "expert_gate", {experts * width, hidden}, true, Init::Normal);
      visit(l.expert_up, p + "expert_up", {experts * width, hidden}, true, Init::Normal);
      visit(l.expert_down, p + "expert_down", {experts * hidden, width}, true, Init::Residual);
    } else {
      if (gated_mlp(c.mlp)) linear(l.gate, l.gate_bias, "gate", ff, hidden, c.mlp_bias, Init::Normal);
      linear(l.up, l.up_bias, "up", ff, hidden, c.mlp_bias, Init::Normal);
      linear(l.down, l.down_bias, "down", hidden, ff, c.mlp_bias, Init::Residual);
    }
    if (c.sandwich_norms)
      visit(l.mlp_post_norm_weight, p + "mlp_post_norm_weight", {hidden}, false, Init::One);
  }
  visit(w.final_norm_weight, "final_norm_weight", {hidden}, false, Init::One);
  if (layer_norm) visit(w.final_norm_bias, "final_norm_bias", {hidden}, false, Init::Zero);
  if (!c.tie_word_embeddings) visit(w.lm_head, "lm_head", {c.vocab_size, hidden}, true, Init::Normal);
}

std::vector<Parameter> model_parameters(const ModelConfig& config) {
  std::vector<Parameter> list;
  ModelWeights layout;
  visit_slots(config, layout,
              [&](Tensor&, const std::string& name, std::vector<int64_t> shape, bool decay, Init) {
                list.push_back({name, std::move(shape), decay, 0, 0});
              });
  return list;
}

// `parameters` with offsets and numel assigned, in order.
std::vector<Parameter> laid_out(std::vector<Parameter> parameters) {
  int64_t total = 0;
  for (Parameter& p : parameters) {
    p.numel = 1;
    for (const int64_t d : p.shape) p.numel *= d;
    p.offset = total;
    total += p.numel;
  }
  return parameters;
}

int64_t total_numel(const std::vector<Parameter>& parameters) {
  return parameters.empty() ? 0 : parameters.back().offset + parameters.back().numel;
}

// Bytes of the values and gradients (`count` floats each) and the two moments (`moments`
// floats each), plus the zeros that clear them in memory the host cannot write (when
// `with_zeros`).
size_t storage_bytes(int64_t count, int64_t moments, bool with_zeros) {
  const auto n = static_cast<size_t>(count);
  const size_t zeros =
      with_zeros ? Arena::footprint(std::min(n, ParameterBuffers::kChunkFloats) * sizeof(float)) : 0;
  return 2 * Arena::footprint(n * sizeof(float)) +
         2 * Arena::footprint(static_cast<size_t>(moments) * sizeof(float)) + zeros;
}

}  // namespace

std::pair<int64_t, int64_t> ParameterBuffers::shard_range(int64_t count, MomentShard shard) {
  if (shard.of < 1 || shard.index < 0 || shard.index >= shard.of)
    fail("training: moment shard {} of {} does not exist", shard.index, shard.of);
  const int64_t per_part = (count + shard.of - 1) / shard.of;
  const int64_t begin = std::min(count, per_part * shard.index);
  return {begin, std::min(count, begin + per_part)};
}

ParameterBuffers::ParameterBuffers(std::vector<Parameter> parameters, Backend* backend, MomentShard shard)
    : parameters_(laid_out(std::move(parameters))),
      backend_(backend != nullptr && !backend->memory().is_host() ? backend : nullptr),
      storage_(storage_bytes(total_numel(parameters_),
                             shard_range(total_numel(parameters_), shard).second -
                                 shard_range(total_numel(parameters_), shard).first,
                             backend_ != nullptr),
               backend_ != nullptr ? backend_->memory() : host_memory()) {
  const int64_t count = total_numel(parameters_);
  const auto [begin, end] = shard_range(count, shard);
  moments_begin_ = begin;
  for (std::span<float>* buffer : {&values_, &gradients_})
    *buffer = {storage_.allocate(DType::F32, {count}).as<float>(), static_cast<size_t>(count)};
  for (std::span<float>* buffer : {&m_, &v_})
    *buffer = {storage_.allocate(DType::F32, {end - begin}).as<float>(), static_cast<size_t>(end - begin)};
  if (backend_ == nullptr) {
    for (const std::span<float> buffer : {values_, gradients_, m_, v_})
      std::fill(buffer.begin(), buffer.end(), 0.0f);
    return;
  }
  const auto zeros = static_cast<int64_t>(std::min(static_cast<size_t>(count), kChunkFloats));
  zeros_ = storage_.allocate(DType::F32, {zeros});
  const std::vector<float> host_zeros(static_cast<size_t>(zeros), 0.0f);
  memory().copy_from_host(zeros_.data, host_zeros.data(), zeros_.nbytes());
  for (const std::span<float> buffer : {values_, gradients_, m_, v_}) zero_on_device(buffer);
}

Tensor ParameterBuffers::view(std::span<float> buffer, const Parameter& p) {
  float* data = buffer.data() + p.offset;
  return p.shape.size() == 1 ? Tensor(data, DType::F32, {p.shape[0]})
                             : Tensor(data, DType::F32, {p.shape[0], p.shape[1]});
}

void ParameterBuffers::zero_grads() {
  if (backend_ == nullptr) {
    std::fill(gradients_.begin(), gradients_.end(), 0.0f);
  } else {
    zero_on_device(gradients_);
  }
}

void ParameterBuffers::zero_on_device(std::span<float> buffer) {
  const int64_t chunk = zeros_.numel();
  for (size_t at = 0; at < buffer.size(); at += static_cast<size_t>(chunk)) {
    const int64_t n = std::min<int64_t>(chunk, static_cast<int64_t>(buffer.size() - at));
    backend_->convert(zeros_.slice_rows(0, n), Tensor(buffer.data() + at, DType::F32, {n}));
  }
}

void ParameterBuffers::fill_values(const std::function<void(std::span<float> values)>& fill) {
  if (backend_ == nullptr) {
    fill(values_);
    return;
  }
  std::vector<float> staging(values_.size());
  fill(staging);
  upload(values_, staging);
}

void ParameterBuffers::copy(std::span<const float> from, std::span<float> to) {
  if (from.size() != to.size())
    fail("training: {} values copied into a buffer of {}", from.size(), to.size());
  if (from.empty()) return;
  if (backend_ == nullptr) {
    std::copy(from.begin(), from.end(), to.begin());
    return;
  }
  const auto n = static_cast<int64_t>(from.size());
  backend_->convert(Tensor(const_cast<float*>(from.data()), DType::F32, {n}),
                    Tensor(to.data(), DType::F32, {n}));
}

void ParameterBuffers::upload(std::span<float> buffer, std::span<const float> host) {
  if (host.size() != buffer.size())
    fail("training: {} values copied into a buffer of {}", host.size(), buffer.size());
  memory().copy_from_host(buffer.data(), host.data(), host.size_bytes());
}

void ParameterBuffers::download(std::span<const float> buffer, std::span<float> host) const {
  if (host.size() != buffer.size())
    fail("training: a buffer of {} values copied into {}", buffer.size(), host.size());
  memory().copy_to_host(host.data(), buffer.data(), buffer.size_bytes());
}

void ParameterBuffers::read_chunks(std::span<const float> buffer,
                                   const std::function<void(std::span<const float> chunk)>& read) const {
  if (backend_ == nullptr) {
    read(buffer);
    return;
  }
  std::vector<float> staging(std::min(buffer.size(), kChunkFloats));
  for (size_t at = 0; at < buffer.size(); at += staging.size()) {
    const std::span<float> chunk =
        std::span<float>(staging).first(std::min(staging.size(), buffer.size() - at));
    download(buffer.subspan(at, chunk.size()), chunk);
    read(chunk);
  }
}

ParameterSet::ParameterSet(const ModelConfig& config, Backend* backend, MomentShard shard)
    : ParameterBuffers(model_parameters(config), backend, shard), config_(config) {
  const auto make_views = [&](ModelWeights& views, bool gradients) {
    size_t index = 0;
    visit_slots(config_, views, [&](Tensor& slot, const std::string&, std::vector<int64_t>, bool, Init) {
      const Parameter& p = parameters()[index++];
      slot = gradients ? gradient_view(p) : value_view(p);
    });
    if (config_.tie_word_embeddings) views.lm_head = views.token_embedding;
  };
  make_views(weights_, false);
  make_views(grads_, true);
  weights_.memory = grads_.memory = &memory();
}

void ParameterSet::init_gpt2(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto uniform = [&] { return (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53; };  // (0, 1)
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config_.num_hidden_layers));
  fill_values([&](std::span<float> values) {
    ModelWeights scratch;
    size_t index = 0;
    visit_slots(config_, scratch, [&](Tensor&, const std::string&, std::vector<int64_t>, bool, Init init) {
      const Parameter& p = parameters()[index++];
      float* x = values.data() + p.offset;
      const double std = init == Init::Residual ? residual_std : 0.02;
      for (int64_t i = 0; i < p.numel; ++i) {
        if (init == Init::One || init == Init::Zero) {
          x[i] = init == Init::One ? 1.0f : 0.0f;
          continue;
        }
        // Box-Muller: one normal per pair of uniforms (simple and portable, unlike std::normal_distribution).
        const double r = std::sqrt(-2.0 * std::log(uniform()));
        x[i] = static_cast<float>(std * r * std::cos(2.0 * std::numbers::pi * uniform()));
      }
    });
  });
}

void ParameterSet::load(const ModelWeights& source) {
  if (!source.memory->is_host())
    fail("training: the model to train from must be loaded in host memory, not placed on a device");
  fill_values([&](std::span<float> values) {
    size_t index = 0;
    visit_slots(config_, source,
                [&](const Tensor& slot, const std::string& name, std::vector<int64_t>, bool, Init) {
                  const Parameter& p = parameters()[index++];
                  if (slot.data == nullptr) fail("training: the model has no tensor for parameter {}", name);
                  if (slot.numel() != p.numel || slot.cols() != p.shape.back())
                    fail("training: parameter {} is {} in the model, expected {} values", name,
                         slot.shape_string(), p.numel);
                  if (slot.dtype != DType::F32 && slot.dtype != DType::BF16 && slot.dtype != DType::F16)
                    fail(
                        "training: parameter {} is stored as {}; training needs f32, bf16 or f16 weights "
                        "(not a quantized model)",
                        name, dtype_name(slot.dtype));
                  for (int64_t i = 0; i < p.numel; ++i)
                    values[static_cast<size_t>(p.offset + i)] =
                        load_as_f32(slot.data, slot.dtype, static_cast<size_t>(i));
                });
  });
}

}  // namespace tokenmill
