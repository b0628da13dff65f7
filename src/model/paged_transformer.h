// PagedTransformer: one forward step over many sequences at once, their keys and values in
// a paged pool (Backend::paged_attention). The serving engine's model runner.
//
// A step takes slices: each is some consecutive tokens of one sequence at positions
// [first_pos, first_pos + n), with the block table that holds the sequence's KV. All
// slices' tokens are stacked into one [rows, hidden] batch, so every matmul reads the
// weights once for the whole step; only attention is per sequence. The KV of each new
// token is stored in its slot before attention reads the pool. Each slice may ask for the
// logits of its last token (a decode, or the last chunk of a prompt), or of its last few
// (speculative decoding: a decode token and the draft after it, each row verifying the next).
// Each slice may name a LoRA adapter: its rows' projections then add the adapter's terms,
// all adapters of a step in one segmented Backend::add_lora per projection (multi-LoRA
// serving, as Punica / S-LoRA batch it).
//
// With a quantized model every op is row-wise exact (Backend::matmul's contract), so a
// sequence's logits do not depend on the rest of the batch; with float weights the matmul
// kernel chosen for the batch size may round differently (see the batch invariance test).
//
// The pool and the activations live in the backend's memory, as must the weights
// (model/weight_placement.h); the logits come back to the host.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/arena.h"
#include "model/layer_ops.h"
#include "model/model.h"

namespace tokenmill {

class PagedTransformer {
 public:
  struct Slice {
    std::span<const int32_t> tokens;  // at least one
    int64_t first_pos = 0;            // position of tokens[0]; positions before it are in the pool
    std::span<const int32_t> blocks;  // block table covering [0, first_pos + tokens.size())
    int64_t logits = 0;               // rows: of the last `logits` tokens (0: none)
    // The LoRA adapter its rows run with (model/peft_adapter.h; its tensors in the backend's
    // memory, its scale 1), or null: the base model.
    const LoraWeights* adapter = nullptr;
  };

  // KV bytes of one block (keys and values of every layer).
  static uint64_t block_bytes(const ModelConfig& config, int64_t block_size, DType kv_dtype);

  // A pool of `num_blocks` blocks of `block_size` tokens, and one more, block id num_blocks,
  // that holds zeros and is never written: a block table may name it for positions no query
  // of a step sees (before a sliding window; serve/block_manager.h); steps of up to `max_tokens` tokens,
  // `max_slices` slices and `max_logits` logits rows (0: max_slices); sequences of up to
  // `context` positions (0: the model's context length; LongRoPE picks its factors by it,
  // model/rope.h). Throws Error on a non-power-of-two block size or a pool that does not fit
  // in memory.
  PagedTransformer(const Model& model, Backend& backend, int64_t num_blocks, int64_t block_size,
                   int64_t max_tokens, int64_t max_slices, DType kv_dtype, int64_t context = 0,
                   int64_t max_logits = 0);

  // Runs one step. Returns the logits [k, vocab] f32 of the slices' logits rows, in slice
  // order then token order, in host memory; valid until the next call. Throws Error if the
  // step exceeds max_tokens / max_slices / max_logits, a position exceeds the context, a
  // block table is too short, a slice asks for more logits rows than it has tokens or names
  // an adapter of another model.
  Tensor forward(std::span<const Slice> slices);
  // The final hidden state (after the final norm) behind logits row `row` of the last
  // forward, copied to `out` [hidden] (embeddings).
  void copy_hidden_row(int64_t row, std::span<float> out) const;
  // Mixture of experts: `observer` is called with each layer's routing of a step's tokens,
  // layer by layer (null: none), as Transformer::observe_expert_routing.
  void observe_expert_routing(std::function<void(const ExpertRouting&)> observer) {
    buffers_.routing_observer = std::move(observer);
  }

  int64_t num_blocks() const { return num_blocks_; }
  int64_t block_size() const { return block_size_; }
  uint64_t pool_bytes() const { return pool_.capacity(); }

  // Not copied or moved: its hooks point back at it.
  PagedTransformer(const PagedTransformer&) = delete;
  PagedTransformer& operator=(const PagedTransformer&) = delete;

 private:
  // The layers' attention over the pool: the step's keys and values stored in their slots first.
  class PoolAttention final : public StepHooks {
   public:
    explicit PoolAttention(PagedTransformer& p) : StepHooks(p.backend_, p.model_.config, p.buffers_), p_(p) {}
    void attend(int64_t layer, const AttentionScores& scores, const LayerTensors& x) override;
    // The base projections, then the step's adapters' terms.
    void project(int64_t layer, const Tensor& x, std::span<const Projection> projections) override;

   private:
    PagedTransformer& p_;
  };

  const Model& model_;
  Backend& backend_;
  int64_t num_blocks_, block_size_, max_tokens_, max_slices_, max_logits_, context_;
  Arena pool_;
  std::vector<Tensor> keys_, values_;  // per layer [num_blocks, block_size, kv_heads, head_dim]
  Arena arena_;
  StepBuffers buffers_;
  PoolAttention hooks_{*this};
  Tensor last_rows_, logits_;       // [max_logits, hidden], [max_logits, vocab]
  std::vector<float> host_logits_;  // forward's result when the backend's memory is not the host's
  // The current step's layout.
  std::vector<int32_t> ids_, positions_;
  std::vector<int64_t> slots_;
  std::vector<Backend::PagedSequence> sequences_;
  // Runs of consecutive rows with one adapter, and one projection's add_lora segments.
  struct AdapterRun {
    int64_t first_row, rows;
    const LoraWeights* adapter;
  };
  std::vector<AdapterRun> adapter_runs_;
  std::vector<Backend::LoraSegment> lora_segments_;
};

}  // namespace tokenmill
