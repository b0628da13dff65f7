// Transformer: the one config-driven forward pass (prefill and incremental decode) of
// every supported architecture, written against the Backend op interface.
//
// Each layer is model/layer_forward.h's, its attention causal over the KV cache (the chunk's
// k and v written into it first: a = attention(q, K[0..p+n), V[0..p+n))); then logits =
// norm_f(x) W_lm_head. Each "x += delta" runs fused with the norm after it (layer_ops.h).
// Learned positions (GPT-2) are added to the token embedding. A prompt longer than the
// chunk size runs in chunks; buffers are sized once.
//
// Activations and the KV cache live in the backend's memory; so must the weights
// (place_weights, model/weight_placement.h, for a GPU backend). The logits come back to the
// host: directly when the backend's memory is the host's, else copied (one row per decode).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/arena.h"
#include "model/kv_cache.h"
#include "model/layer_ops.h"
#include "model/model.h"

namespace tokenmill {

class Transformer {
 public:
  static constexpr int64_t kDefaultChunkTokens = 256;

  // `context` caps the sequence length (0: the model's context length). The KV cache is
  // `kv_dtype`, by default Model::default_kv_dtype() (f16 for GGUF and 16-bit HF models, f32 for f32 ones).
  // Throws Error when the model's weights are not in the backend's memory.
  Transformer(const Model& model, Backend& backend, int64_t context = 0,
              int64_t chunk_tokens = kDefaultChunkTokens, std::optional<DType> kv_dtype = std::nullopt);

  // Appends `ids` to the sequence and returns the logits of the last one: [1, vocab] f32 in
  // host memory, valid until the next call. Throws Error if the sequence would exceed the
  // context or an id is outside the vocabulary.
  Tensor forward_last(std::span<const int32_t> ids);

  // Appends `ids` and writes the logits of every one of them to `logits` [ids.size(), vocab]
  // (host memory).
  void forward_all(std::span<const int32_t> ids, std::span<float> logits);

  // The tokens whose keys and values are in the cache, in order.
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int64_t position() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t context() const { return context_; }
  // Forgets every token from `length` on (their cache rows are overwritten later), so a
  // new sequence sharing a prefix with the cached one only computes its new suffix.
  void truncate(int64_t length) {
    if (length < position()) tokens_.resize(static_cast<size_t>(length < 0 ? 0 : length));
  }
  void reset() { tokens_.clear(); }

  // Mixture of experts: `observer` is called with each layer's routing of a chunk's tokens,
  // layer by layer, as the forward computes it (null: none).
  void observe_expert_routing(std::function<void(const ExpertRouting&)> observer) {
    buffers_.routing_observer = std::move(observer);
  }
  // Commits the whole KV cache now (KvCache::commit), for a context sized to what will be used.
  void commit_cache() { cache_.commit(); }

  // Not copied or moved: its hooks point back at it.
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

 private:
  // Runs n <= chunk tokens at position() and leaves the final-normed hidden states of the
  // last `out_rows` tokens in `normed_` rows [0, out_rows).
  void run_chunk(std::span<const int32_t> ids, int64_t out_rows);
  void check_append(size_t n) const;

  // The layers' attention over the KV cache: the chunk's keys and values stored at
  // position() first (by the projections themselves into an f32 cache).
  class CacheAttention final : public StepHooks {
   public:
    explicit CacheAttention(Transformer& t) : StepHooks(t.backend_, t.config_, t.buffers_), t_(t) {}
    void attend(int64_t layer, const AttentionScores& scores, const LayerTensors& x) override;

   private:
    Transformer& t_;
  };

  const Model& model_;
  const ModelConfig& config_;
  Backend& backend_;
  int64_t context_;
  int64_t chunk_;
  std::vector<int32_t> tokens_;
  KvCache cache_;
  std::vector<int32_t> positions_;
  Arena arena_;
  StepBuffers buffers_;
  CacheAttention hooks_{*this};
  Tensor logits_;                   // [chunk, vocab] in the backend's memory
  std::vector<float> host_logits_;  // [vocab]: forward_last's result when that memory is not the host's
};

}  // namespace tokenmill
