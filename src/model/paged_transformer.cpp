#include "model/paged_transformer.h"

#include <algorithm>
#include <cmath>

#include "core/checked_math.h"
#include "model/layer_ops.h"
#include "model/norm.h"
#include "model/weight_placement.h"

namespace tokenmill {

namespace {

uint64_t layer_pool_bytes(const ModelConfig& c, int64_t blocks, int64_t block_size, DType kv_dtype) {
  return checked_mul(checked_product({blocks, block_size, c.num_key_value_heads, c.head_dim}, "KV pool"),
                     dtype_size(kv_dtype), "KV pool");
}

}  // namespace

uint64_t PagedTransformer::block_bytes(const ModelConfig& config, int64_t block_size, DType kv_dtype) {
  return checked_mul(layer_pool_bytes(config, 1, block_size, kv_dtype),
                     2 * static_cast<uint64_t>(config.num_hidden_layers), "KV block");
}

PagedTransformer::PagedTransformer(const Model& model, Backend& backend, int64_t num_blocks,
                                   int64_t block_size, int64_t max_tokens, int64_t max_slices, DType kv_dtype,
                                   int64_t context, int64_t max_logits)
    : model_(model),
      backend_(backend),
      num_blocks_(num_blocks),
      block_size_(block_size),
      max_tokens_(max_tokens),
      max_slices_(max_slices),
      max_logits_(max_logits > 0 ? max_logits : max_slices),
      context_(context > 0 ? std::min(context, model.config.context_length())
                           : model.config.context_length()),
      pool_(static_cast<size_t>(checked_mul(Arena::footprint(static_cast<size_t>(layer_pool_bytes(
                                                model.config, num_blocks + 1, block_size, kv_dtype))),
                                            2 * static_cast<uint64_t>(model.config.num_hidden_layers),
                                            "KV pool")),
            backend.memory()),
      arena_(
          StepBuffers::bytes(model.config, max_tokens) +
              Arena::footprint(checked_product({max_logits_, model.config.hidden_size, 4}, "step logits")) +
              Arena::footprint(checked_product({max_logits_, model.config.vocab_size, 4}, "step logits")),
          backend.memory()),
      buffers_(StepBuffers::allocate(arena_, model, max_tokens, context_)),
      last_rows_(arena_.allocate(DType::F32, {max_logits_, model.config.hidden_size})),
      logits_(arena_.allocate(DType::F32, {max_logits_, model.config.vocab_size})) {
  const ModelConfig& c = model.config;
  if (!weights_in(model.weights, backend.memory()))
    fail("the model's weights are not in the memory of the {} backend (place_weights first)", backend.name());
  if (block_size < 1 || (block_size & (block_size - 1)) != 0)
    fail("KV block size {} is not a power of two", block_size);
  if (num_blocks < 1 || max_tokens < 1 || max_slices < 1)
    fail("paged transformer: {} blocks, {} tokens and {} slices per step: each must be >= 1", num_blocks,
         max_tokens, max_slices);
  // Each layer's pools, the block of zeros last (read, with probability 0, for positions
  // before a window whose blocks were released).
  const std::vector<std::byte> zeros(static_cast<size_t>(layer_pool_bytes(c, 1, block_size, kv_dtype)));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    for (std::vector<Tensor>* pools : {&keys_, &values_}) {
      pools->push_back(
          pool_.allocate(kv_dtype, {num_blocks + 1, block_size, c.num_key_value_heads, c.head_dim}));
      backend.memory().copy_from_host(static_cast<std::byte*>(pools->back().data) + num_blocks * zeros.size(),
                                      zeros.data(), zeros.size());
    }
}

Tensor PagedTransformer::forward(std::span<const Slice> slices) {
  const ModelConfig& c = model_.config;
  if (slices.empty()) fail("paged forward: no slices");
  if (static_cast<int64_t>(slices.size()) > max_slices_)
    fail("paged forward: {} slices exceed the step limit {}", slices.size(), max_slices_);
  ids_.clear();
  positions_.clear();
  slots_.clear();
  sequences_.clear();
  adapter_runs_.clear();
  int64_t logits_rows = 0;
  for (const Slice& s : slices) {
    const auto n = static_cast<int64_t>(s.tokens.size());
    const int64_t end = s.first_pos + n;
    if (n == 0 || s.first_pos < 0) fail("paged forward: a slice needs tokens at a position >= 0");
    if (s.logits < 0 || s.logits > n)
      fail("paged forward: a slice of {} tokens cannot give {} logits rows", n, s.logits);
    logits_rows += s.logits;
    if (logits_rows > max_logits_) fail("paged forward: the step exceeds its {} logits rows", max_logits_);
    if (end > context_) fail("paged forward: positions up to {} exceed the context length {}", end, context_);
    if (static_cast<int64_t>(s.blocks.size()) * block_size_ < end)
      fail("paged forward: {} blocks of {} tokens cannot hold {} positions", s.blocks.size(), block_size_,
           end);
    if (static_cast<int64_t>(ids_.size()) + n > max_tokens_)
      fail("paged forward: the step exceeds its {} tokens", max_tokens_);
    if (s.adapter != nullptr) {
      check_unmerged_adapter(c, *s.adapter);
      const auto first_row = static_cast<int64_t>(ids_.size());
      if (!adapter_runs_.empty() && adapter_runs_.back().adapter == s.adapter &&
          adapter_runs_.back().first_row + adapter_runs_.back().rows == first_row) {
        adapter_runs_.back().rows += n;
      } else {
        adapter_runs_.push_back({first_row, n, s.adapter});
      }
    }
    sequences_.push_back({static_cast<int64_t>(ids_.size()), n, s.first_pos, s.blocks});
    for (int64_t t = 0; t < n; ++t) {
      const int64_t p = s.first_pos + t;
      ids_.push_back(s.tokens[static_cast<size_t>(t)]);
      positions_.push_back(static_cast<int32_t>(p));
      const int32_t block = s.blocks[static_cast<size_t>(p / block_size_)];
      if (block < 0 || block >= num_blocks_) fail("paged forward: block id {} is outside the pool", block);
      slots_.push_back(static_cast<int64_t>(block) * block_size_ + p % block_size_);
    }
  }
  const auto rows = static_cast<int64_t>(ids_.size());
  const LayerTensors t = step_layer_tensors(c, buffers_, rows);
  const Tensor &x = t.x, &delta = t.delta;
  embed_tokens(backend_, c, model_.weights, ids_, positions_, x, delta);
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer)
    forward_layer(backend_, c, model_.weights.layers[static_cast<size_t>(layer)], layer, t,
                  layer == 0 ? nullptr : &delta, {positions_, &buffers_.rope_frequencies(c, layer)}, hooks_);
  // Gather the last rows of each slice that wants logits, with the last layer's delta added
  // (no other row of x needs it), then one final norm and one lm_head matmul.
  int64_t outputs = 0;
  for (size_t i = 0; i < slices.size(); ++i) {
    const int64_t wanted = slices[i].logits;
    if (wanted == 0) continue;
    const int64_t row = sequences_[i].first_row + sequences_[i].rows - wanted;
    backend_.add(x.slice_rows(row, wanted), delta.slice_rows(row, wanted),
                 last_rows_.slice_rows(outputs, wanted));
    outputs += wanted;
  }
  const Tensor logits = logits_.slice_rows(0, outputs);
  if (outputs == 0) return logits;
  const Tensor last = last_rows_.slice_rows(0, outputs);
  apply_norm(backend_, c, last, model_.weights.final_norm_weight, model_.weights.final_norm_bias, last);
  output_logits(backend_, c, model_.weights, last, logits);
  if (backend_.memory().is_host()) return logits;
  host_logits_.resize(static_cast<size_t>(logits.numel()));
  backend_.memory().copy_to_host(host_logits_.data(), logits.data, logits.nbytes());
  return Tensor(host_logits_.data(), DType::F32, {outputs, c.vocab_size});
}

void PagedTransformer::copy_hidden_row(int64_t row, std::span<float> out) const {
  const Tensor hidden = last_rows_.slice_rows(row, 1);
  if (static_cast<int64_t>(out.size()) != hidden.numel())
    fail("copy_hidden_row: the output holds {} floats, the hidden state {}", out.size(), hidden.numel());
  if (backend_.memory().is_host()) {
    std::copy_n(hidden.as<const float>(), out.size(), out.data());
  } else {
    backend_.memory().copy_to_host(out.data(), hidden.data, hidden.nbytes());
  }
}

void PagedTransformer::PoolAttention::project(int64_t layer, const Tensor& x,
                                              std::span<const Projection> projections) {
  StepHooks::project(layer, x, projections);
  for (const Projection& projection : projections) {
    p_.lora_segments_.clear();
    for (const AdapterRun& run : p_.adapter_runs_) {
      const LoraLinear& adapted = run.adapter->at(layer, projection.target);
      if (adapted.a.data != nullptr)
        p_.lora_segments_.push_back({run.first_row, run.rows, &adapted.a, &adapted.b});
    }
    if (!p_.lora_segments_.empty()) backend_.add_lora(x, p_.lora_segments_, *projection.y);
  }
}

void PagedTransformer::PoolAttention::attend(int64_t layer, const AttentionScores& scores,
                                             const LayerTensors& x) {
  const auto l = static_cast<size_t>(layer);
  backend_.store_kv(x.k, p_.slots_, p_.keys_[l]);
  backend_.store_kv(x.v, p_.slots_, p_.values_[l]);
  backend_.paged_attention(x.q, p_.keys_[l], p_.values_[l], p_.sequences_, scores, x.attended);
}

}  // namespace tokenmill
