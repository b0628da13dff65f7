// model_bench: a Llama-3-8B-shaped model (bf16 weights, random values) on the GPU through the
// model layer itself: prefill of a 512-token prompt and greedy decode at batch 1
// (Transformer), then decode at batch 16, 64 and 256 (PagedTransformer, one step decodes
// every sequence). One JSON object per line, {"name", "ms", "tokens_per_s"} (+ the roofline
// share for batch-1 decode: weight bytes per token over the copy bandwidth measured here);
// bench/gpu/transformers_peer.py times transformers on the same shapes.
//
// usage: model_bench [LAYERS]   (32 by default; fewer for a quick run)
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/dtype.h"
#include "core/error.h"
#include "model/model.h"
#include "model/paged_transformer.h"
#include "model/transformer.h"

namespace tokenmill {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kPrompt = 512, kDecode = 128;          // batch 1
constexpr int64_t kBatchPrompt = 32, kBatchDecode = 32;  // batches of 16, 64, 256
constexpr int64_t kBlock = 16;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void report(const std::string& name, double seconds, int64_t tokens, const std::string& extra = "") {
  fmt::print("{{\"name\": \"{}\", \"ms\": {:.3f}, \"tokens_per_s\": {:.1f}{}}}\n", name, seconds * 1e3,
             static_cast<double>(tokens) / seconds, extra);
  std::fflush(stdout);
}

// Copies a block of seeded values (normal, std 0.02, as `dtype`) over and over into tensors
// in device memory: random enough for the arithmetic, cheap to make for 16 GB.
class WeightFiller {
 public:
  explicit WeightFiller(DeviceMemory& memory) : memory_(memory) {
    std::mt19937_64 rng(42);
    std::normal_distribution<float> value(0.0f, 0.02f);
    f32_.resize(kElements);
    for (float& v : f32_) v = value(rng);
    bf16_.resize(kElements * 2);
    for (size_t i = 0; i < kElements; ++i) store_from_f32(bf16_.data(), DType::BF16, i, f32_[i]);
  }

  Tensor make(TensorStore& store, DType dtype, std::initializer_list<int64_t> dims) const {
    const Tensor t = store.allocate(dtype, dims);
    const auto* block = dtype == DType::BF16 ? bf16_.data() : reinterpret_cast<const uint8_t*>(f32_.data());
    const size_t block_bytes = kElements * dtype_size(dtype);
    for (size_t at = 0; at < t.nbytes(); at += block_bytes)
      memory_.copy_from_host(static_cast<uint8_t*>(t.data) + at, block,
                             std::min(block_bytes, t.nbytes() - at));
    return t;
  }

 private:
  static constexpr size_t kElements = size_t{16} << 20;
  DeviceMemory& memory_;
  std::vector<float> f32_;
  std::vector<uint8_t> bf16_;
};

std::unique_ptr<Model> llama3_8b_shape(Backend& backend, int64_t layers) {
  auto model = std::make_unique<Model>();
  model->path = "llama-3-8b-shape";
  const nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}},
                                 {"model_type", "llama"},
                                 {"vocab_size", 128256},
                                 {"hidden_size", 4096},
                                 {"intermediate_size", 14336},
                                 {"num_hidden_layers", layers},
                                 {"num_attention_heads", 32},
                                 {"num_key_value_heads", 8},
                                 {"max_position_embeddings", 8192},
                                 {"rms_norm_eps", 1e-5},
                                 {"rope_theta", 500000.0},
                                 {"tie_word_embeddings", false},
                                 {"torch_dtype", "bfloat16"}};
  model->config = parse_model_config(config, "the Llama-3-8B shape");
  const ModelConfig& c = model->config;
  ModelWeights& w = model->weights;
  w.placed = TensorStore(backend.memory());
  w.memory = &backend.memory();
  const WeightFiller fill(backend.memory());
  const int64_t q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  w.token_embedding = fill.make(w.placed, DType::BF16, {c.vocab_size, c.hidden_size});
  for (int64_t l = 0; l < layers; ++l) {
    LayerWeights lw;
    lw.attn_norm_weight = fill.make(w.placed, DType::F32, {c.hidden_size});
    lw.q = fill.make(w.placed, DType::BF16, {q, c.hidden_size});
    lw.k = fill.make(w.placed, DType::BF16, {kv, c.hidden_size});
    lw.v = fill.make(w.placed, DType::BF16, {kv, c.hidden_size});
    lw.o = fill.make(w.placed, DType::BF16, {c.hidden_size, q});
    lw.mlp_norm_weight = fill.make(w.placed, DType::F32, {c.hidden_size});
    lw.gate = fill.make(w.placed, DType::BF16, {c.intermediate_size, c.hidden_size});
    lw.up = fill.make(w.placed, DType::BF16, {c.intermediate_size, c.hidden_size});
    lw.down = fill.make(w.placed, DType::BF16, {c.hidden_size, c.intermediate_size});
    w.layers.push_back(lw);
  }
  w.final_norm_weight = fill.make(w.placed, DType::F32, {c.hidden_size});
  w.lm_head = fill.make(w.placed, DType::BF16, {c.vocab_size, c.hidden_size});
  return model;
}

int32_t argmax(const Tensor& logits, int64_t row) {
  const float* p = logits.as<const float>() + row * logits.cols();
  return static_cast<int32_t>(std::max_element(p, p + logits.cols()) - p);
}

// GB/s of a 2 GiB device-to-device copy (bytes read + written).
double copy_bandwidth(Backend& backend) {
  constexpr size_t kBytes = size_t{2} << 30;
  void* a = backend.memory().allocate(kBytes);
  void* b = backend.memory().allocate(kBytes);
  cuda::copy_on_device(b, a, kBytes);
  cuda::synchronize_device();
  const auto start = Clock::now();
  for (int i = 0; i < 10; ++i) cuda::copy_on_device(b, a, kBytes);
  cuda::synchronize_device();
  const double gbps = 20.0 * kBytes / seconds_since(start) / 1e9;
  backend.memory().free(a);
  backend.memory().free(b);
  return gbps;
}

void batch_one(const Model& model, Backend& backend, double copy_gbps) {
  Transformer transformer(model, backend, kPrompt + kDecode + 8, kPrompt);
  std::vector<int32_t> prompt(kPrompt);
  for (int64_t i = 0; i < kPrompt; ++i)
    prompt[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919) % 128000);
  int32_t token = argmax(transformer.forward_last(std::span(prompt).first(64)), 0);  // warm-up
  token = argmax(transformer.forward_last({&token, 1}), 0);
  transformer.reset();

  auto start = Clock::now();
  token = argmax(transformer.forward_last(prompt), 0);
  report("prefill 512", seconds_since(start), kPrompt);
  start = Clock::now();
  for (int64_t step = 0; step < kDecode; ++step) token = argmax(transformer.forward_last({&token, 1}), 0);
  const double seconds = seconds_since(start);
  // Every weight is read once per token (bf16 matrices, f32 norms, embedding row negligible).
  double weight_bytes = 0;
  for (const LayerWeights& l : model.weights.layers)
    for (const Tensor* t : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) weight_bytes += t->nbytes();
  weight_bytes += model.weights.lm_head.nbytes();
  const double roofline_tps = copy_gbps * 1e9 / weight_bytes;
  report("decode batch 1", seconds, kDecode,
         fmt::format(", \"roofline_tokens_per_s\": {:.1f}, \"share_of_roofline\": {:.3f}", roofline_tps,
                     static_cast<double>(kDecode) / seconds / roofline_tps));
}

void batched(const Model& model, Backend& backend, int64_t batch) {
  const int64_t blocks_per_sequence = (kBatchPrompt + kBatchDecode + kBlock - 1) / kBlock;
  PagedTransformer paged(model, backend, batch * blocks_per_sequence, kBlock, batch * kBatchPrompt, batch,
                         DType::F16);
  std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(batch)), tables(static_cast<size_t>(batch));
  std::vector<PagedTransformer::Slice> slices(static_cast<size_t>(batch));
  for (int64_t s = 0; s < batch; ++s) {
    auto& t = tokens[static_cast<size_t>(s)];
    for (int64_t i = 0; i < kBatchPrompt; ++i) t.push_back(static_cast<int32_t>((s * 131 + i * 17) % 128000));
    for (int64_t b = 0; b < blocks_per_sequence; ++b)
      tables[static_cast<size_t>(s)].push_back(static_cast<int32_t>(s * blocks_per_sequence + b));
    slices[static_cast<size_t>(s)] = {t, 0, tables[static_cast<size_t>(s)], 1};
  }
  Tensor logits = paged.forward(slices);  // every prompt in one step
  const auto start = Clock::now();
  for (int64_t step = 0; step < kBatchDecode; ++step) {
    for (int64_t s = 0; s < batch; ++s) {
      auto& t = tokens[static_cast<size_t>(s)];
      t.push_back(argmax(logits, s));
      slices[static_cast<size_t>(s)] = {std::span(&t.back(), 1), static_cast<int64_t>(t.size()) - 1,
                                        tables[static_cast<size_t>(s)], 1};
    }
    logits = paged.forward(slices);
  }
  report(fmt::format("decode batch {}", batch), seconds_since(start), batch * kBatchDecode);
}

int run(int64_t layers) {
  const std::string why = cuda::unavailable_reason();
  if (!why.empty()) {
    fmt::print(stderr, "model_bench: {}\n", why);
    return 2;
  }
  const auto backend = make_cuda_backend();
  const double copy_gbps = copy_bandwidth(*backend);
  fmt::print(stderr, "model_bench on {}: copy {:.0f} GB/s, {} layers\n", backend->name(), copy_gbps, layers);
  const auto model = llama3_8b_shape(*backend, layers);
  batch_one(*model, *backend, copy_gbps);
  for (const int64_t batch : {16, 64, 256}) batched(*model, *backend, batch);
  return 0;
}

}  // namespace
}  // namespace tokenmill

int main(int argc, char** argv) {
  try {
    return tokenmill::run(argc > 1 ? std::atoll(argv[1]) : 32);
  } catch (const tokenmill::Error& e) {
    std::fprintf(stderr, "model_bench: error: %s\n", e.what());
    return 1;
  }
}
