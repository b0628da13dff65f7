// ComputeWeights: the bf16 / fp16 copy of a model's matrices that a reduced-precision training
// run multiplies with (train/precision.h), next to the FP32 master it is rounded from.
//
// weights() is a ModelWeights for TrainingPass: the matrices (every layer's q, k, v, o, gate,
// up, down, and the lm_head) are the copies; every other tensor (token and position
// embeddings, norm weights, biases) views the master itself. A tied lm_head gets a copy of its
// own while the embedding lookup keeps reading the FP32 table, so both uses still add into the
// one FP32 gradient of the token embedding. The copies live in the backend's memory, next to
// the master (a GPU's for the CUDA backend), and refresh() rounds the master into them with
// Backend::convert (round to nearest even), on the device. A matrix already in the copies'
// dtype (a frozen bf16 base model under LoRA) is viewed, not copied; one in any other dtype
// than f32 is an Error.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/tensor_store.h"
#include "model/weights.h"

namespace tokenmill {

class ComputeWeights {
 public:
  // `master`: weights in backend.memory() (a ParameterSet's, or a placed frozen model's), which
  // must outlive this.
  // dtype: BF16 or F16. The copies are allocated here and filled by a first refresh().
  ComputeWeights(const ModelWeights& master, DType dtype, Backend& backend);

  // Rounds every master matrix into its copy: after each optimizer step that changed them.
  void refresh();

  const ModelWeights& weights() const { return weights_; }
  size_t bytes() const { return copies_.bytes(); }

 private:
  Backend& backend_;
  TensorStore copies_;
  std::vector<std::pair<Tensor, Tensor>> rounded_;  // (master matrix, its copy)
  ModelWeights weights_;
};

}  // namespace tokenmill
