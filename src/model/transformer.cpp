#include "model/transformer.h"

#include <algorithm>
#include <cmath>

#include "model/layer_ops.h"
#include "model/norm.h"
#include "model/weight_placement.h"

namespace tokenmill {

Transformer::Transformer(const Model& model, Backend& backend, int64_t context, int64_t chunk_tokens,
                         std::optional<DType> kv_dtype)
    : model_(model),
      config_(model.config),
      backend_(backend),
      context_(context > 0 ? std::min(context, model.config.context_length())
                           : model.config.context_length()),
      chunk_(std::max<int64_t>(1, std::min(chunk_tokens, context_))),
      cache_(model.config, context_, kv_dtype.value_or(model.default_kv_dtype()), backend.memory()),
      arena_(StepBuffers::bytes(model.config, chunk_) +
                 Arena::footprint(static_cast<size_t>(chunk_ * model.config.vocab_size) * sizeof(float)),
             backend.memory()),
      buffers_(StepBuffers::allocate(arena_, model, chunk_, context_)),
      logits_(arena_.allocate(DType::F32, {chunk_, model.config.vocab_size})) {
  if (!weights_in(model.weights, backend.memory()))
    fail("the model's weights are not in the memory of the {} backend (place_weights first)", backend.name());
  if (!backend.memory().is_host()) host_logits_.resize(static_cast<size_t>(model.config.vocab_size));
  positions_.reserve(static_cast<size_t>(chunk_));
  tokens_.reserve(static_cast<size_t>(context_));
}

void Transformer::check_append(size_t n) const {
  if (n == 0) fail("forward needs at least one token");
  if (static_cast<int64_t>(n) > context_ - position())
    fail("sequence of {} tokens exceeds the context length {} ({} already in the cache)",
         position() + static_cast<int64_t>(n), context_, position());
}

Tensor Transformer::forward_last(std::span<const int32_t> ids) {
  check_append(ids.size());
  const auto n = static_cast<int64_t>(ids.size());
  for (int64_t begin = 0; begin < n; begin += chunk_) {
    const int64_t count = std::min(chunk_, n - begin);
    run_chunk(ids.subspan(static_cast<size_t>(begin), static_cast<size_t>(count)),
              begin + count == n ? 1 : 0);
  }
  const Tensor logits = logits_.slice_rows(0, 1);
  output_logits(backend_, config_, model_.weights, buffers_.normed.slice_rows(0, 1), logits);
  if (host_logits_.empty()) return logits;
  backend_.memory().copy_to_host(host_logits_.data(), logits.data, logits.nbytes());
  return Tensor(host_logits_.data(), DType::F32, {1, config_.vocab_size});
}

void Transformer::forward_all(std::span<const int32_t> ids, std::span<float> logits) {
  check_append(ids.size());
  const auto n = static_cast<int64_t>(ids.size());
  const int64_t vocab = config_.vocab_size;
  if (static_cast<int64_t>(logits.size()) != n * vocab)
    fail("forward_all: logits buffer holds {} floats, {} needed", logits.size(), n * vocab);
  for (int64_t begin = 0; begin < n; begin += chunk_) {
    const int64_t count = std::min(chunk_, n - begin);
    run_chunk(ids.subspan(static_cast<size_t>(begin), static_cast<size_t>(count)), count);
    const Tensor host_out(logits.data() + begin * vocab, DType::F32, {count, vocab});
    const Tensor out = backend_.memory().is_host() ? host_out : logits_.slice_rows(0, count);
    output_logits(backend_, config_, model_.weights, buffers_.normed.slice_rows(0, count), out);
    if (out.data != host_out.data) backend_.memory().copy_to_host(host_out.data, out.data, out.nbytes());
  }
}

void Transformer::run_chunk(std::span<const int32_t> ids, int64_t out_rows) {
  const auto n = static_cast<int64_t>(ids.size());
  positions_.clear();
  for (int64_t t = 0; t < n; ++t) positions_.push_back(static_cast<int32_t>(position() + t));

  LayerTensors t = step_layer_tensors(config_, buffers_, n);
  embed_tokens(backend_, config_, model_.weights, ids, positions_, t.x, t.delta);
  // An f32 cache takes the projections in place; an f16 one stores them after RoPE.
  const bool in_place = cache_.dtype() == DType::F32;
  for (int64_t layer = 0; layer < config_.num_hidden_layers; ++layer) {
    if (in_place) {
      t.k = t.k_raw = cache_.keys(layer).slice_rows(position(), n);
      t.v = cache_.values(layer).slice_rows(position(), n);
    }
    forward_layer(backend_, config_, model_.weights.layers[static_cast<size_t>(layer)], layer, t,
                  layer == 0 ? nullptr : &t.delta, {positions_, &buffers_.rope_frequencies(config_, layer)},
                  hooks_);
  }
  tokens_.insert(tokens_.end(), ids.begin(), ids.end());
  if (out_rows > 0) {  // the other rows of x never get the last layer's delta: nothing reads them
    add_final_norm(backend_, model_, t.x.slice_rows(n - out_rows, out_rows),
                   t.delta.slice_rows(n - out_rows, out_rows), buffers_.normed.slice_rows(0, out_rows));
  }
}

void Transformer::CacheAttention::attend(int64_t layer, const AttentionScores& scores,
                                         const LayerTensors& x) {
  const int64_t n = x.q.dim(0), position = t_.position();
  const Tensor keys = t_.cache_.keys(layer), values = t_.cache_.values(layer);
  if (x.k.data != keys.slice_rows(position, n).data) {  // not projected in place
    backend_.convert(x.k, keys.slice_rows(position, n));
    backend_.convert(x.v, values.slice_rows(position, n));
  }
  backend_.attention(x.q, keys, values, position, scores, x.attended);
}

}  // namespace tokenmill
