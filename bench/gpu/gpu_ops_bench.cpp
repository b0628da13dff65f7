// gpu_ops_bench: the CUDA backend's hot ops at Llama-3-8B shapes, against the GPU's own
// roofline measured in the same run. One JSON object per line on stdout:
//   {"name": "...", "ms": median milliseconds per call, "flops": per call, "bytes": per call,
//    "tflops": ..., "gbps": ...}
// bench/gpu/torch_peer.py times the same ops in PyTorch; bench/gpu/compare.py joins the two
// into the ratio table that scripts/gpu-check.sh prints.
//
// Timing: each op is queued `reps` times between two device synchronisations and the wall
// time divided by reps (the backend has its own stream, so events on another stream would
// not bracket its work); the median of 5 such rounds is reported, after a warm-up round.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"

namespace tokenmill {
namespace {

// Llama-3-8B.
constexpr int64_t kHidden = 4096, kIntermediate = 14336, kHeads = 32, kKvHeads = 8, kHeadDim = 128;

// A tensor in the backend's memory filled with seeded random values in [-1, 1) (as `dtype`),
// freed at scope end.
class DeviceTensor {
 public:
  DeviceTensor(Backend& backend, DType dtype, std::initializer_list<int64_t> dims, uint64_t seed)
      : memory_(backend.memory()), tensor_(nullptr, dtype, dims) {
    tensor_.data = memory_.allocate(tensor_.nbytes());
    std::vector<uint8_t> host(tensor_.nbytes());
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    for (int64_t i = 0; i < tensor_.numel(); ++i)
      store_from_f32(host.data(), dtype, static_cast<size_t>(i), value(rng));
    memory_.copy_from_host(tensor_.data, host.data(), host.size());
  }
  ~DeviceTensor() { memory_.free(tensor_.data); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  const Tensor& operator*() const { return tensor_; }

 private:
  DeviceMemory& memory_;
  Tensor tensor_;
};

double median_ms(const std::function<void()>& op, int reps) {
  op();
  cuda::synchronize_device();
  std::vector<double> rounds;
  for (int r = 0; r < 5; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) op();
    cuda::synchronize_device();
    rounds.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / reps);
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[rounds.size() / 2];
}

void report(const std::string& name, double ms, double flops, double bytes) {
  fmt::print(
      "{{\"name\": \"{}\", \"ms\": {:.6f}, \"flops\": {:.0f}, \"bytes\": {:.0f}, \"tflops\": {:.2f}, "
      "\"gbps\": {:.1f}}}\n",
      name, ms, flops, bytes, flops / (ms * 1e9), bytes / (ms * 1e6));
  std::fflush(stdout);
}

// The roofline's bandwidth: a 2 GiB device-to-device copy (bytes read + bytes written).
void bench_copy(Backend& backend) {
  constexpr size_t kBytes = size_t{2} << 30;
  DeviceMemory& memory = backend.memory();
  void* a = memory.allocate(kBytes);
  void* b = memory.allocate(kBytes);
  const double ms = median_ms([&] { cuda::copy_on_device(b, a, kBytes); }, 10);
  report("copy 2GiB", ms, 0, 2.0 * kBytes);
  memory.free(a);
  memory.free(b);
}

// y[n, m] = x[n, k] . w[m, k]^T with bf16 weights (x f32, rounded to bf16 by the backend).
void bench_matmul(Backend& backend, int64_t n, int64_t k, int64_t m) {
  DeviceTensor x(backend, DType::F32, {n, k}, 1), w(backend, DType::BF16, {m, k}, 2),
      y(backend, DType::F32, {n, m}, 3);
  const double ms = median_ms([&] { backend.matmul(*x, *w, nullptr, *y); }, n == 1 ? 200 : 20);
  const double bytes = static_cast<double>((*x).nbytes() + (*w).nbytes() + (*y).nbytes());
  report(fmt::format("matmul bf16 n={} k={} m={}", n, k, m), ms, 2.0 * n * k * m, bytes);
}

// Causal GQA attention of n new tokens after `past` cached ones, bf16 cache.
void bench_attention(Backend& backend, int64_t n, int64_t past) {
  const int64_t context = past + n;
  DeviceTensor q(backend, DType::F32, {n, kHeads, kHeadDim}, 4),
      k(backend, DType::BF16, {context, kKvHeads, kHeadDim}, 5),
      v(backend, DType::BF16, {context, kKvHeads, kHeadDim}, 6),
      out(backend, DType::F32, {n, kHeads, kHeadDim}, 7);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  const double ms = median_ms([&] { backend.attention(*q, *k, *v, past, scale, *out); }, n == 1 ? 200 : 10);
  // Scores and the weighted sum: 2 x 2 hd flops per (query, key) pair attended, per head.
  double pairs = 0;
  for (int64_t t = 0; t < n; ++t) pairs += static_cast<double>(past + t + 1);
  const double bytes = static_cast<double>((*q).nbytes() + (*k).nbytes() + (*v).nbytes() + (*out).nbytes());
  report(fmt::format("attention bf16 n={} past={}", n, past), ms, 4.0 * kHeadDim * kHeads * pairs, bytes);
}

// The training attention backward over one sequence of n tokens, f32 operands, with the
// kernel TOKENMILL_CUDA_ATTENTION names ("" = the automatic choice, the tiled kernel here).
// FLOPs as FlashAttention counts them: 2.5x the forward's (5 products of 2 hd per pair).
void bench_attention_backward(Backend& backend, int64_t n, int64_t heads, int64_t kv_heads, int64_t hd,
                              const char* kernel) {
  DeviceTensor q(backend, DType::F32, {n, heads, hd}, 11), k(backend, DType::F32, {n, kv_heads, hd}, 12),
      v(backend, DType::F32, {n, kv_heads, hd}, 13), dout(backend, DType::F32, {n, heads, hd}, 14),
      out(backend, DType::F32, {n, heads, hd}, 15), dq(backend, DType::F32, {n, heads, hd}, 16),
      dk(backend, DType::F32, {n, kv_heads, hd}, 17), dv(backend, DType::F32, {n, kv_heads, hd}, 18);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  setenv("TOKENMILL_CUDA_ATTENTION", kernel, 1);
  backend.attention(*q, *k, *v, 0, scale, *out);
  const double ms =
      median_ms([&] { backend.attention_backward(*q, *k, *v, *out, *dout, scale, *dq, *dk, *dv); }, 5);
  unsetenv("TOKENMILL_CUDA_ATTENTION");
  const double pairs = static_cast<double>(n) * static_cast<double>(n + 1) / 2;
  const double bytes = 2.0 * static_cast<double>((*q).nbytes() + (*k).nbytes() + (*v).nbytes()) +
                       2.0 * static_cast<double>((*out).nbytes());
  report(fmt::format("attention backward n={} heads={}/{} hd={}{}", n, heads, kv_heads, hd,
                     *kernel != 0 ? fmt::format(" {}", kernel) : ""),
         ms, 10.0 * static_cast<double>(hd * heads) * pairs, bytes);
}

void bench_rms_norm(Backend& backend, int64_t n) {
  DeviceTensor x(backend, DType::F32, {n, kHidden}, 8), weight(backend, DType::BF16, {kHidden}, 9),
      y(backend, DType::F32, {n, kHidden}, 10);
  const double ms = median_ms([&] { backend.rms_norm(*x, *weight, 1e-5f, *y); }, 100);
  report(fmt::format("rms_norm n={} d={}", n, kHidden), ms, 0, 2.0 * static_cast<double>((*x).nbytes()));
}

int run() {
  const std::string why = cuda::unavailable_reason();
  if (!why.empty()) {
    fmt::print(stderr, "gpu_ops_bench: {}\n", why);
    return 2;
  }
  const auto backend = make_cuda_backend();
  fmt::print(stderr, "gpu_ops_bench on {}\n", backend->name());
  bench_copy(*backend);
  for (const int64_t n : {1, 16, 64, 256}) bench_matmul(*backend, n, kHidden, kIntermediate);
  for (const int64_t n : {512, 4096}) {
    bench_matmul(*backend, n, kHidden, kIntermediate);
    bench_matmul(*backend, n, kIntermediate, kHidden);
  }
  bench_attention(*backend, 512, 0);
  bench_attention(*backend, 1, 4095);
  // GPT-2-124M's and Llama-3-8B's training shapes.
  for (const char* kernel : {"", "rowwise"}) {
    bench_attention_backward(*backend, 1024, 12, 12, 64, kernel);
    bench_attention_backward(*backend, 2048, kHeads, kKvHeads, kHeadDim, kernel);
  }
  bench_rms_norm(*backend, 512);
  return 0;
}

}  // namespace
}  // namespace tokenmill

int main() {
  try {
    return tokenmill::run();
  } catch (const tokenmill::Error& e) {
    std::fprintf(stderr, "gpu_ops_bench: error: %s\n", e.what());
    return 1;
  }
}
