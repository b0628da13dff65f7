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
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "model/model.h"

namespace tokenmill {

struct WeightTraffic {
  uint64_t layer_bytes = 0;            // all layers' tensors
  uint64_t logits_bytes = 0;           // final norm + lm_head
  uint64_t embedding_row_bytes = 0;    // one token row (+ one position row)
  uint64_t kv_bytes_per_position = 0;  // K and V of one position over all layers
};

// The traffic of `model`'s weights as loaded, with a KV cache of `kv_dtype`.
WeightTraffic weight_traffic(const Model& model, DType kv_dtype);

// Minimum bytes one forward_last call of `tokens` tokens at `first_position` reads, in
// chunks of `chunk` tokens (see above).
double forward_bytes(const WeightTraffic& traffic, int64_t first_position, int64_t tokens, int64_t chunk);

}  // namespace tokenmill
