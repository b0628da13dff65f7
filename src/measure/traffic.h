// Memory traffic of a forward pass: the minimum bytes it must read, the denominator of its
// arithmetic intensity and the numerator of its achieved bandwidth.
//
// One Transformer::forward_last call of n tokens runs in chunks of at most `chunk` tokens.
// It reads, at the least:
//  - every layer's weights (matrices, norms, biases) once per chunk;
//  - the final norm and the logits matrix (lm_head, or the tied token embedding, counted
//    once) once per call: only the last token's logits are computed;
//  - one token-embedding row (plus a learned-position row) per token;
//  - per chunk, the K and V rows of the cache its tokens attend: positions [0, chunk end).
// Activations are left out (they stay in cache at these sizes). A decode step is a call of
// one token, so it reads every weight and the whole cache once: its bytes per token.
// With a mixture of experts a layer's experts are read only where a token is routed to them:
// a step of t tokens reads at most min(experts, t k) of each layer's experts (exactly k for
// one token); that bound is counted unless the caller counted the experts the steps' routing
// actually read (ExpertReads, from the forward's routing observer): tokens usually share
// experts, so for t > 1 the bound overstates the bytes.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "model/expert_routing.h"
#include "model/model.h"

namespace tokenmill {

struct WeightTraffic {
  uint64_t layer_bytes = 0;            // all layers' tensors but the experts'
  uint64_t logits_bytes = 0;           // final norm + lm_head
  uint64_t embedding_row_bytes = 0;    // one token row (+ one position row)
  uint64_t kv_bytes_per_position = 0;  // K and V of one position over all layers
  uint64_t expert_bytes = 0;           // one expert's matrices over all layers (0: no experts)
  int64_t experts = 0, experts_per_token = 0;
};

// The experts a run's steps actually read, counted from their routing: each layer's distinct
// chosen experts, summed over the layers and steps (count() after each layer's routing).
struct ExpertReads {
  int64_t layer_experts = 0;
  void count(const ExpertRouting& routing);
};

// The traffic of `model`'s weights as loaded, with a KV cache of `kv_dtype`.
WeightTraffic weight_traffic(const Model& model, DType kv_dtype);

// Minimum bytes one forward_last call of `tokens` tokens at `first_position` reads, in
// chunks of `chunk` tokens (see above).
double forward_bytes(const WeightTraffic& traffic, int64_t first_position, int64_t tokens, int64_t chunk);

// The bytes of the layers a step of `tokens` tokens reads: layer_bytes and the experts they
// can be routed to (see above).
double step_layer_bytes(const WeightTraffic& traffic, int64_t tokens);

// The bytes of the experts a run actually read (`reads`; `layers`: the model's layers). A run
// whose routing was counted reads forward_bytes / batched_decode_bytes of traffic_without_experts
// plus these.
double routed_expert_bytes(const WeightTraffic& traffic, const ExpertReads& reads, int64_t layers);
WeightTraffic traffic_without_experts(WeightTraffic traffic);

// Minimum bytes one PagedTransformer step decoding `batch` sequences, each one token at
// `position`, reads: the weights once for the whole step (layers, final norm, lm_head), and per
// sequence one embedding row and the K and V of its position + 1 attended positions. Batch 1
// equals forward_bytes(traffic, position, 1, chunk).
double batched_decode_bytes(const WeightTraffic& traffic, int64_t position, int64_t batch);

// Minimum bytes one full-model training step reads from its f32 master copy of `parameters`
// parameters (train/parameters.h): the weights in the forward and again in the backward
// (dx = dy W), the gradients they add into, and AdamW's values, gradients and two moments:
// 7 x 4 bytes per parameter. The activations, which training writes and reads back, are not
// counted, so the intensity this gives is an upper bound.
double training_step_bytes(int64_t parameters);

}  // namespace tokenmill
