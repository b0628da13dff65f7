// bench_kernels: the machine's read bandwidth and the CPU backend's hot kernels.
//
//   ReadBandwidth/threads:N measure/stream_read.h's sum over one 256 MiB buffer split between N threads
//                           (the roofline for memory-bound decode)
//   Matmul/<isa>/<dtype>/n/k/m/<cold|hot>
//                           y[n, m] = x[n, k] . w[m, k]^T. n = 1 is decode (GEMV; n = 4 four
//                           tokens a step, the most the GEMV takes), n = 512
//                           prefill (GEMM). "cold" cycles through enough copies of w to
//                           exceed the last-level cache (as a model whose layers do not
//                           fit in cache); "hot" reuses one w. dtype: f32, bf16, f16 and the
//                           ggml block formats (q4_0 ... q6_k, at SmolLM2's 576 x 1536 and
//                           1536 x 576; the k-quants need k % 256 == 0, so only the latter).
//   Attention/<isa>/ctx     one decode step of 32 heads x 64 over a ctx-long f32 cache.
//   Rope/n                  RoPE on n tokens x 32 heads x 128.
//   OpenBlasSgemm/n/k/m     the f32 matmul through OpenBLAS, for comparison (when installed).
//
// Counters: GB/s (bytes of x, w, y per second), w_GB/s (bytes of w alone: for quantized w the
// figure to compare across dtypes), GFLOP/s (2 n m k per second) and, for decode, pct_of_read_bw (GB/s over
// the read bandwidth measured once per process with the kernels' own OpenMP thread count, OMP_NUM_THREADS or
// all cores).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/device_memory.h"
#include "core/dtype.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "measure/flops.h"
#include "measure/stream_read.h"
#include "quant/quant_reference.h"

namespace tokenmill {
namespace {

constexpr size_t kStreamBytes = size_t{256} << 20;

// Host memory as the engine allocates it (huge pages for large blocks), so the kernels read
// their operands the way they read a model's.
struct HostFree {
  void operator()(void* p) const { host_memory().free(p); }
};
using Buffer = std::unique_ptr<uint8_t, HostFree>;

Buffer allocate(size_t bytes) { return Buffer(static_cast<uint8_t*>(host_memory().allocate(bytes))); }

// Fills `count` elements of `dtype` with small, normal, non-zero values.
void fill(void* data, DType dtype, size_t count) {
  for (size_t i = 0; i < count; ++i)
    store_from_f32(data, dtype, i, 0.001f * static_cast<float>(static_cast<int>(i % 97) - 48) + 0.0005f);
}

constexpr int64_t kStreamWords = static_cast<int64_t>(kStreamBytes / sizeof(uint64_t));

const uint64_t* stream_buffer() {
  static const Buffer buffer = [] {
    Buffer b = allocate(kStreamBytes);
    auto* words = reinterpret_cast<uint64_t*>(b.get());
    for (int64_t i = 0; i < kStreamWords; ++i) words[i] = static_cast<uint64_t>(i);
    return b;
  }();
  return reinterpret_cast<const uint64_t*>(buffer.get());
}

// The read bandwidth (bytes/s) with the backend's thread count (OpenMP, as the kernels
// run), best of 10 passes, measured once: the denominator of pct_of_read_bw.
double read_bandwidth() {
  static const double bandwidth = [] {
    const uint64_t* data = stream_buffer();
    double best = 0;
    for (int pass = 0; pass < 11; ++pass) {
      const double start = omp_get_wtime();
      uint64_t total = 0;
#pragma omp parallel num_threads(thread_count()) reduction(+ : total)
      {
        const auto [begin, end] = team_share(kStreamWords, omp_get_thread_num(), omp_get_num_threads());
        total += stream_sum(data, begin, end);
      }
      benchmark::DoNotOptimize(total);
      const double seconds = omp_get_wtime() - start;
      if (pass > 0 && kStreamBytes / seconds > best) best = kStreamBytes / seconds;  // pass 0 warms up
    }
    return best;
  }();
  return bandwidth;
}

// Each benchmark thread streams its share of one 256 MiB buffer per iteration.
void BM_ReadBandwidth(benchmark::State& state) {
  const uint64_t* data = stream_buffer();
  const auto [begin, end] = team_share(kStreamWords, state.thread_index(), state.threads());
  for (auto _ : state) benchmark::DoNotOptimize(stream_sum(data, begin, end));
  const double bytes = static_cast<double>(end - begin) * sizeof(uint64_t);
  state.SetBytesProcessed(static_cast<int64_t>(static_cast<double>(state.iterations()) * bytes));
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * bytes * 1e-9, benchmark::Counter::kIsRate);
}

// The machine may be shared: with --benchmark_repetitions=N, "min" (of times) and "max" (of
// rates) pick the least disturbed repetition.
void best_of_repetitions(benchmark::internal::Benchmark* b) {
  b->ComputeStatistics("min",
                       [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); });
  b->ComputeStatistics("max",
                       [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); });
}

CpuIsa isa_arg(int64_t v) { return v == 2 ? CpuIsa::Amx : v == 1 ? CpuIsa::Avx512 : CpuIsa::Avx2; }
constexpr DType kBenchDtypes[] = {DType::F32,  DType::BF16, DType::F16,  DType::Q4_0,
                                  DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                                  DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::MXFP4};
DType dtype_arg(int64_t v) { return kBenchDtypes[v]; }

// `rows` rows of `k` weights of `dtype`: plain types through fill(), block formats quantized
// from the same values by the reference quantiser.
void fill_weights(void* data, DType dtype, int64_t rows, int64_t k) {
  if (!is_quantized(dtype)) {
    fill(data, dtype, static_cast<size_t>(rows * k));
    return;
  }
  std::vector<float> row(static_cast<size_t>(k));
  const size_t row_bytes = dtype_row_bytes(dtype, k);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < k; ++i)
      row[static_cast<size_t>(i)] =
          0.001f * static_cast<float>(static_cast<int>((r * k + i) % 97) - 48) + 0.0005f;
    quant::quantize_row(dtype, row.data(), static_cast<uint8_t*>(data) + static_cast<size_t>(r) * row_bytes,
                        k);
  }
}

// Args: isa (0 avx2, 1 avx512, 2 amx), dtype (index into kBenchDtypes), n, k, m, cold (0/1).
void BM_Matmul(benchmark::State& state) {
  const CpuIsa isa = isa_arg(state.range(0));
  const DType dtype = dtype_arg(state.range(1));
  const int64_t n = state.range(2), k = state.range(3), m = state.range(4);
  const bool cold = state.range(5) != 0;
  if (!cpu_supports(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  state.SetLabel(std::string(cpu_isa_name(isa)) + "/" + std::string(dtype_name(dtype)) +
                 (cold ? "/cold" : "/hot"));
  auto backend = make_cpu_backend_for(isa);
  const size_t w_bytes = static_cast<size_t>(m) * dtype_row_bytes(dtype, k);
  const size_t copies = cold ? (kStreamBytes + w_bytes - 1) / w_bytes : 1;
  Buffer weights = allocate(w_bytes * copies);
  fill_weights(weights.get(), dtype, m, k);
  for (size_t c = 1; c < copies; ++c) std::memcpy(weights.get() + c * w_bytes, weights.get(), w_bytes);
  Buffer x_buffer = allocate(static_cast<size_t>(n * k) * 4),
         y_buffer = allocate(static_cast<size_t>(n * m) * 4);
  fill(x_buffer.get(), DType::F32, static_cast<size_t>(n * k));
  const Tensor x(x_buffer.get(), DType::F32, {n, k});
  const Tensor y(y_buffer.get(), DType::F32, {n, m});
  size_t next = 0;
  for (auto _ : state) {
    const Tensor w(weights.get() + next * w_bytes, dtype, {m, k});
    backend->matmul(x, w, nullptr, y);
    benchmark::ClobberMemory();
    next = next + 1 == copies ? 0 : next + 1;
  }
  const double iterations = static_cast<double>(state.iterations());
  const double bytes = static_cast<double>(w_bytes) + 4.0 * static_cast<double>(n * k + n * m);
  state.counters["GB/s"] = benchmark::Counter(iterations * bytes * 1e-9, benchmark::Counter::kIsRate);
  state.counters["w_GB/s"] =
      benchmark::Counter(iterations * static_cast<double>(w_bytes) * 1e-9, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(iterations * 2.0 * static_cast<double>(n * m * k) * 1e-9,
                                                 benchmark::Counter::kIsRate);
  if (n <= 4) {
    // GB/s / read bandwidth, as a percentage: the rate counter divides by the elapsed time.
    state.counters["pct_of_read_bw"] =
        benchmark::Counter(iterations * bytes * 100.0 / read_bandwidth(), benchmark::Counter::kIsRate);
  }
}

// AMX differs from AVX-512 only in the bf16 GEMM (n = 512).
void matmul_args(benchmark::internal::Benchmark* b) {
  // AMX at SmolLM2's and GPT-2's shapes, and at Llama-3-8B's attention and down projections.
  for (const auto& [k, m] :
       {std::pair<int64_t, int64_t>{576, 1536}, {768, 3072}, {4096, 4096}, {14336, 4096}})
    b->Args({2, 1, 512, k, m, 0});
  for (const int64_t isa : {1, 0})
    for (const int64_t dtype : {0, 1, 2})
      for (const auto& [k, m] : {std::pair<int64_t, int64_t>{576, 1536}, {768, 3072}}) {
        b->Args({isa, dtype, 1, k, m, 1});
        b->Args({isa, dtype, 1, k, m, 0});
        b->Args({isa, dtype, 4, k, m, 1});  // four tokens a step (batched or speculative decode)
        b->Args({isa, dtype, 512, k, m, 0});
      }
  b->ArgNames({"isa", "dtype", "n", "k", "m", "cold"});
}

// Quantized weights at SmolLM2-135M's MLP shapes, with f32 and bf16 rows at the same shapes
// for comparison. dtype indices: 0 f32, 1 bf16, 3 q4_0, 4 q4_1, 5 q5_0, 6 q5_1, 7 q8_0,
// 8 q4_k, 9 q5_k, 10 q6_k, 11 mxfp4.
void quant_matmul_args(benchmark::internal::Benchmark* b) {
  for (const int64_t isa : {1, 0})
    for (const int64_t dtype : {0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11})
      for (const auto& [k, m] : {std::pair<int64_t, int64_t>{576, 1536}, {1536, 576}}) {
        if (dtype >= 8 && dtype <= 10 && k % 256 != 0) continue;
        if (dtype <= 1 && k == 576) continue;  // already among matmul_args' rows
        b->Args({isa, dtype, 1, k, m, 1});
        b->Args({isa, dtype, 1, k, m, 0});
        b->Args({isa, dtype, 4, k, m, 1});  // four tokens a step (batched or speculative decode)
        b->Args({isa, dtype, 512, k, m, 0});
      }
  b->ArgNames({"isa", "dtype", "n", "k", "m", "cold"});
}

#ifdef TOKENMILL_BENCH_OPENBLAS
// The two OpenBLAS entry points used, declared here so no particular cblas.h is needed.
extern "C" void cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                            const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
extern "C" void openblas_set_num_threads(int threads);

// The same f32 y = x . w^T through OpenBLAS (row major, w transposed), same thread count.
// Args: n, k, m.
void BM_OpenBlasSgemm(benchmark::State& state) {
  constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
  const int64_t n = state.range(0), k = state.range(1), m = state.range(2);
  openblas_set_num_threads(thread_count());
  std::vector<float> x(static_cast<size_t>(n * k)), w(static_cast<size_t>(m * k)),
      y(static_cast<size_t>(n * m));
  fill(x.data(), DType::F32, x.size());
  fill(w.data(), DType::F32, w.size());
  for (auto _ : state) {
    cblas_sgemm(kRowMajor, kNoTrans, kTrans, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
                1.0f, x.data(), static_cast<int>(k), w.data(), static_cast<int>(k), 0.0f, y.data(),
                static_cast<int>(m));
    benchmark::ClobberMemory();
  }
  state.SetLabel("openblas/f32/hot");
  const double iterations = static_cast<double>(state.iterations());
  const double bytes = 4.0 * static_cast<double>(m * k + n * k + n * m);
  state.counters["GB/s"] = benchmark::Counter(iterations * bytes * 1e-9, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(iterations * 2.0 * static_cast<double>(n * m * k) * 1e-9,
                                                 benchmark::Counter::kIsRate);
}
BENCHMARK(BM_OpenBlasSgemm)
    ->Args({1, 576, 1536})
    ->Args({512, 576, 1536})
    ->Args({1, 768, 3072})
    ->Args({512, 768, 3072})
    ->ArgNames({"n", "k", "m"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->MinTime(0.5)
    ->Apply(best_of_repetitions);
#endif

// One decode step at context `ctx` over an f32 or f16 cache (dtype arg 0 or 2), heads of 64:
// Llama's layout (32 query heads over 8 kv heads, layout arg 0) or SmolLM2's (9 over 3,
// layout arg 1: fewer kv heads than work items for the threads).
void BM_Attention(benchmark::State& state) {
  const CpuIsa isa = isa_arg(state.range(0));
  const DType cache = dtype_arg(state.range(1));
  const int64_t ctx = state.range(2), hd = 64;
  const int64_t heads = state.range(3) == 0 ? 32 : 9, kv_heads = state.range(3) == 0 ? 8 : 3;
  if (!cpu_supports(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  state.SetLabel(std::string(cpu_isa_name(isa)) + "/" + std::string(dtype_name(cache)));
  auto backend = make_cpu_backend_for(isa);
  std::vector<float> q(static_cast<size_t>(heads * hd)), out(q.size());
  const auto cache_values = static_cast<size_t>(ctx * kv_heads * hd);
  Buffer keys = allocate(cache_values * dtype_size(cache)),
         values = allocate(cache_values * dtype_size(cache));
  fill(q.data(), DType::F32, q.size());
  fill(keys.get(), cache, cache_values);
  fill(values.get(), cache, cache_values);
  const Tensor qt(q.data(), DType::F32, {1, heads, hd});
  const Tensor kt(keys.get(), cache, {ctx, kv_heads, hd});
  const Tensor vt(values.get(), cache, {ctx, kv_heads, hd});
  const Tensor ot(out.data(), DType::F32, {1, heads, hd});
  for (auto _ : state) {
    backend->attention(qt, kt, vt, ctx - 1, 0.125f, ot);
    benchmark::ClobberMemory();
  }
  const double bytes = 2.0 * static_cast<double>(cache_values * dtype_size(cache));  // the K and V caches
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * bytes * 1e-9, benchmark::Counter::kIsRate);
}

// A prefill's causal attention: n queries at positions 0..n-1 over their own keys, SmolLM2's
// layout (9 query heads over 3 kv heads of 64), an f32 or f16 cache (dtype arg 0 or 2), with a
// sliding window of `window` positions (0: none; GFLOP/s count the positions attended).
void BM_PrefillAttention(benchmark::State& state) {
  const CpuIsa isa = isa_arg(state.range(0));
  const DType cache = dtype_arg(state.range(1));
  const int64_t n = state.range(2), window = state.range(3), heads = 9, kv_heads = 3, hd = 64;
  if (!cpu_supports(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  state.SetLabel(std::string(cpu_isa_name(isa)) + "/" + std::string(dtype_name(cache)));
  auto backend = make_cpu_backend_for(isa);
  const AttentionScores scores(0.125f, window, 0.0f);
  std::vector<float> q(static_cast<size_t>(n * heads * hd)), out(q.size());
  const auto cache_values = static_cast<size_t>(n * kv_heads * hd);
  Buffer keys = allocate(cache_values * dtype_size(cache)),
         values = allocate(cache_values * dtype_size(cache));
  fill(q.data(), DType::F32, q.size());
  fill(keys.get(), cache, cache_values);
  fill(values.get(), cache, cache_values);
  const Tensor qt(q.data(), DType::F32, {n, heads, hd});
  const Tensor kt(keys.get(), cache, {n, kv_heads, hd});
  const Tensor vt(values.get(), cache, {n, kv_heads, hd});
  const Tensor ot(out.data(), DType::F32, {n, heads, hd});
  for (auto _ : state) {
    backend->attention(qt, kt, vt, 0, scores, ot);
    benchmark::ClobberMemory();
  }
  // q.k and p.v: 2 x 2 hd flops per (query head, key) pair attended.
  const double flops =
      4.0 * static_cast<double>(hd * heads) * static_cast<double>(attended_positions(0, n, window));
  state.counters["GFLOP/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * flops * 1e-9, benchmark::Counter::kIsRate);
}

BENCHMARK(BM_ReadBandwidth)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(1.0)
    ->Threads(1)
    ->Threads(2)
    ->Apply([](benchmark::internal::Benchmark* b) {
      if (omp_get_num_procs() > 2) b->Threads(omp_get_num_procs());
    })
    ->Apply(best_of_repetitions);
BENCHMARK(BM_Matmul)
    ->Apply(matmul_args)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->MinTime(0.5)
    ->Apply(best_of_repetitions);
BENCHMARK(BM_Matmul)
    ->Name("QuantMatmul")
    ->Apply(quant_matmul_args)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->MinTime(0.5)
    ->Apply(best_of_repetitions);
// RoPE over a prefill chunk: n tokens x 32 heads x 128 (positions 0..n-1).
void BM_Rope(benchmark::State& state) {
  const int64_t n = state.range(0), heads = 32, hd = 128;
  auto backend = make_cpu_backend();
  std::vector<float> x(static_cast<size_t>(n * heads * hd)), freq(static_cast<size_t>(hd / 2));
  fill(x.data(), DType::F32, x.size());
  for (size_t j = 0; j < freq.size(); ++j) freq[j] = std::pow(10000.0f, -2.0f * static_cast<float>(j) / hd);
  std::vector<int32_t> positions(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) positions[static_cast<size_t>(t)] = static_cast<int32_t>(t);
  const Tensor xt(x.data(), DType::F32, {n, heads, hd});
  const Tensor ft(freq.data(), DType::F32, {hd / 2});
  for (auto _ : state) {
    backend->rope(xt, positions, ft, RopeLayout::Neox, 1.0f);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_Rope)->Arg(1)->Arg(512)->ArgName("n")->Unit(benchmark::kMicrosecond)->UseRealTime();

BENCHMARK(BM_PrefillAttention)
    ->ArgsProduct({{2, 1, 0}, {0, 2}, {512}, {0}})
    ->ArgNames({"isa", "cache", "n", "window"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->Apply(best_of_repetitions);
// Gemma 3's sliding layers in small: a 4096-token prefill, whole or over a window of 512.
BENCHMARK(BM_PrefillAttention)
    ->ArgsProduct({{1}, {2}, {4096}, {0, 512}})
    ->ArgNames({"isa", "cache", "n", "window"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->Apply(best_of_repetitions);
BENCHMARK(BM_Attention)
    ->ArgsProduct({{1, 0}, {0, 2}, {512, 1024, 2048, 4096}, {0, 1}})
    ->ArgNames({"isa", "cache", "ctx", "layout"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->Apply(best_of_repetitions);

}  // namespace
}  // namespace tokenmill

BENCHMARK_MAIN();
