// ParameterBuffers: trainable f32 tensors (FP32 master weights), their gradients and their
// AdamW moments, in flat buffers: what the optimizer steps and checkpoints store.
// ParameterSet: the whole model as ParameterBuffers, with ModelWeights views for the
// forward/backward (full fine-tuning and training from scratch; train/lora_parameters.h
// holds a LoRA adapter instead).
//
// Every parameter has an engine name ("token_embedding", "layers.3.q", "layers.3.q_bias",
// "final_norm_weight", "lm_head", ...; checkpoints use them) and a weight-decay flag:
// decay applies to the 2-D matrices of the layers and the untied lm_head; never to
// embeddings, norm weights or biases (the usual GPT-2 / nanoGPT / llm.c policy).
// A tied lm_head is the token embedding itself in both views (no separate parameter).
//
// Memory: the buffers live in host memory, or in a backend's memory (a GPU's) when one is
// given. The spans and views below address that memory: ops take them as they are, but the
// host may read or write them directly only when memory().is_host(); otherwise it goes
// through fill_values / upload / download / read_chunks, which are plain views or memcpy
// on the host (no staging, no extra copy) and DeviceMemory copies elsewhere.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/arena.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace tokenmill {

// ZeRO-1 (train/zero.h): hold the AdamW moments of part `index` of `of` equal parts of the
// flat buffers only (the last part may be shorter or empty); {0, 1}: all of them.
struct MomentShard {
  int index = 0, of = 1;
};

struct Parameter {
  std::string name;
  std::vector<int64_t> shape;
  bool decay = false;
  int64_t offset = 0;  // into the flat buffers, in floats
  int64_t numel = 0;
};

class ParameterBuffers {
 public:
  ParameterBuffers(const ParameterBuffers&) = delete;
  ParameterBuffers& operator=(const ParameterBuffers&) = delete;
  virtual ~ParameterBuffers() = default;

  const std::vector<Parameter>& parameters() const { return parameters_; }
  int64_t count() const { return static_cast<int64_t>(values_.size()); }
  // Where the buffers live (see "Memory" above).
  DeviceMemory& memory() const { return storage_.memory(); }

  std::span<float> values() { return values_; }
  std::span<float> gradients() { return gradients_; }
  // The moments of floats [moments_begin(), moments_end()) of the flat buffers (all of them
  // unless constructed with a MomentShard): index i is the moment of float moments_begin() + i.
  std::span<float> first_moments() { return m_; }
  std::span<float> second_moments() { return v_; }
  int64_t moments_begin() const { return moments_begin_; }
  int64_t moments_end() const { return moments_begin_ + static_cast<int64_t>(m_.size()); }
  // [begin, end) of part `shard.index` of a count-float buffer cut in shard.of equal parts.
  static std::pair<int64_t, int64_t> shard_range(int64_t count, MomentShard shard);
  std::span<const float> values() const { return values_; }
  std::span<const float> gradients() const { return gradients_; }
  std::span<const float> first_moments() const { return m_; }
  std::span<const float> second_moments() const { return v_; }
  // On the host, or with the backend's ops (copies of a buffer of zeros) in its memory.
  void zero_grads();

  // Sets every value: `fill` writes count() floats into a host span, values() itself in host
  // memory, else a staging buffer that is then copied in.
  void fill_values(const std::function<void(std::span<float> values)>& fill);
  // Copies floats between two spans of this memory (the buffers, or staging allocated from
  // memory()), which must not overlap and must agree in size: on the host, or with the
  // backend's convert in its memory.
  void copy(std::span<const float> from, std::span<float> to);
  // Copies host floats into / out of one of the four buffers (the sizes must agree).
  void upload(std::span<float> buffer, std::span<const float> host);
  void download(std::span<const float> buffer, std::span<float> host) const;
  // Calls `read` on the contents of one of the four buffers, in order, as host spans: the
  // buffer itself in host memory, else copies of at most kChunkFloats floats at a time.
  static constexpr size_t kChunkFloats = size_t{4} << 20;
  void read_chunks(std::span<const float> buffer,
                   const std::function<void(std::span<const float> chunk)>& read) const;

 protected:
  // Zero-filled buffers for `parameters` (name, shape, decay given; offsets and numel are
  // assigned here, in order), in `backend`'s memory, or in host memory when it is null, with
  // the moments of `shard` only.
  ParameterBuffers(std::vector<Parameter> parameters, Backend* backend, MomentShard shard);
  // A parameter's values or gradients as a [n] or [rows, cols] tensor.
  Tensor value_view(const Parameter& p) const { return view(values_, p); }
  Tensor gradient_view(const Parameter& p) const { return view(gradients_, p); }

 private:
  static Tensor view(std::span<float> buffer, const Parameter& p);
  // Zeroes `buffer` with the backend's convert from zeros_ (memory not host).
  void zero_on_device(std::span<float> buffer);

  std::vector<Parameter> parameters_;
  Backend* backend_;  // null: host memory
  Arena storage_;     // the four buffers, and zeros_ when not in host memory
  std::span<float> values_, gradients_, m_, v_;
  int64_t moments_begin_ = 0;
  Tensor zeros_;  // up to kChunkFloats zeros in backend memory (the source zero_grads copies)
};

class ParameterSet : public ParameterBuffers {
 public:
  // All parameters of `config`'s architecture, zero-filled, in `backend`'s memory (host
  // memory when null); both views' ModelWeights::memory say where.
  explicit ParameterSet(const ModelConfig& config, Backend* backend = nullptr, MomentShard shard = {});

  // GPT-2 initialisation, seeded (mt19937_64, Box-Muller normals): matrices and embeddings
  // N(0, 0.02), the residual output projections (o, down) N(0, 0.02 / sqrt(2 * layers)),
  // norm weights 1, biases 0.
  void init_gpt2(uint64_t seed);
  // Copies a loaded model's weights (f32, bf16 or f16; quantized types are refused; in host
  // memory) into the master copy, checking every shape.
  void load(const ModelWeights& source);

  const ModelWeights& weights() const { return weights_; }
  const ModelWeights& grads() const { return grads_; }

 private:
  ModelConfig config_;
  ModelWeights weights_, grads_;
};

}  // namespace tokenmill
