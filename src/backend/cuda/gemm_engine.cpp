#include "backend/cuda/gemm_engine.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/linear_kernels.h"
#include "core/error.h"

namespace tokenmill::cuda {

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;
constexpr int kTuneCandidates = 8;  // heuristic answers timed under TOKENMILL_GEMM_TUNE=1
constexpr int kTuneRuns = 5;        // timed runs of each (after one warm-up run)
// The BIAS epilogue's kernels assume a 16-byte-aligned bias (below that PyTorch saw
// "misaligned address" faults); a bias aligned to less is added apart.
constexpr uint32_t kMinBiasAlignment = 16;

static_assert(sizeof(cublasLtMatmulAlgo_t) == sizeof(GemmAlgorithm::words),
              "cublasLtMatmulAlgo_t changed size");

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F16: return CUDA_R_16F;
    default: fail_unsupported_dtype("matmul", t);
  }
}

GemmAlgorithm to_words(const cublasLtMatmulAlgo_t& algo, bool tuned) {
  GemmAlgorithm a;
  std::memcpy(a.words.data(), &algo, sizeof(algo));
  a.tuned = tuned;
  return a;
}

cublasLtMatmulAlgo_t to_algo(const GemmAlgorithm& a) {
  cublasLtMatmulAlgo_t algo;
  std::memcpy(&algo, a.words.data(), sizeof(algo));
  return algo;
}

bool tuning_requested() {
  const char* value = std::getenv("TOKENMILL_GEMM_TUNE");
  return value != nullptr && std::string_view(value) == "1";
}

// A CUDA event, destroyed with its scope.
class Event {
 public:
  Event() { TM_CUDA_CHECK(cudaEventCreate(&event_)); }
  ~Event() { cudaEventDestroy(event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

std::string describe(const GemmKey& key) {
  return fmt::format("m={} n={} k={} type={} trans_a={} trans_b={} alignments A={} B={} D={} bias={}", key.m,
                     key.n, key.k, key.type, key.trans_a, key.trans_b, key.align_a, key.align_b, key.align_d,
                     key.align_bias);
}

// The key of a product; `bias` is the epilogue's (null: none).
GemmKey key_of(const GemmLayout& layout, const void* a, const void* b, DType type, const float* d,
               const float* bias) {
  return GemmKey{.m = layout.m,
                 .n = layout.n,
                 .k = layout.k,
                 .type = static_cast<int32_t>(cuda_type(type)),
                 .trans_a = layout.trans_a,
                 .trans_b = layout.trans_b,
                 .align_a = address_alignment(a),
                 .align_b = address_alignment(b),
                 .align_d = address_alignment(d),
                 .align_bias = bias != nullptr ? address_alignment(bias) : 0};
}

}  // namespace

// The cuBLASLt descriptors of one product, initialised in place (nothing to destroy). With
// a bias, the BIAS epilogue adds the f32 vector `bias` (one value per row of D).
struct GemmEngine::Descriptors {
  cublasLtMatmulDescOpaque_t op{};
  cublasLtMatrixLayoutOpaque_t a{}, b{}, d{};
  const GemmLayout& g;

  Descriptors(const GemmLayout& layout, cudaDataType_t type, const float* bias = nullptr) : g(layout) {
    TM_CUBLAS_CHECK(cublasLtMatmulDescInit(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t trans_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    TM_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(&op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
    TM_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(&op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
    const auto u64 = [](int64_t v) { return static_cast<uint64_t>(v); };
    TM_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&a, type, u64(g.a_rows()), u64(g.a_cols()), g.lda));
    TM_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&b, type, u64(g.b_rows()), u64(g.b_cols()), g.ldb));
    TM_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&d, CUDA_R_32F, u64(g.m), u64(g.n), g.ldd));
    if (bias == nullptr) return;
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    const cudaDataType_t bias_type = CUDA_R_32F;
    TM_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(&op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    TM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(&op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                   sizeof(bias_type)));
    TM_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(&op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
};

GemmEngine::GemmEngine(cudaStream_t stream, DevicePool& pool)
    : stream_(stream), pool_(pool), handle_(make_cublaslt()), tune_(tuning_requested()) {
  workspace_ = pool_.allocate(kWorkspaceBytes, "cuBLASLt workspace");
  int device = 0;
  TM_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  TM_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  cache_path_ = gemm_algorithm_cache_path(std::getenv("XDG_CACHE_HOME"), std::getenv("HOME"), prop.name,
                                          prop.major, prop.minor, cublasLtGetVersion());
  if (!cache_path_.empty()) cache_ = load_gemm_algorithm_cache(cache_path_);
}

GemmEngine::~GemmEngine() {
  if (dirty_ && !cache_path_.empty()) {
    try {
      save_gemm_algorithm_cache(cache_, cache_path_);
    } catch (const std::exception& e) {
      spdlog::warn("the GEMM algorithm cache was not saved: {}", e.what());
    }
  }
}

void GemmEngine::multiply(const GemmLayout& layout, const void* a, const void* b, DType type, float* d,
                          bool accumulate) {
  if (layout.m == 0 || layout.n == 0) return;
  if (layout.k == 0) {
    // D is n columns of ldd = m floats: the row-major [n, m] matrix.
    if (!accumulate) launch_broadcast_rows(nullptr, DType::F32, layout.n, layout.m, d, stream_);
    return;
  }
  const GemmKey key = key_of(layout, a, b, type, d, nullptr);
  const float beta = accumulate ? 1.0f : 0.0f;
  if (!padded_.contains(key)) {
    Descriptors desc(layout, cuda_type(type));
    if (const std::optional<cublasLtMatmulAlgo_t> algo = algorithm_for(key, desc, a, b, beta)) {
      run(desc, *algo, a, b, beta, d);
      return;
    }
    spdlog::debug("cuBLASLt has no algorithm for the product {}: computing it on 16-byte-aligned copies",
                  describe(key));
  }
  multiply_padded(key, layout, a, b, type, d, accumulate);
}

bool GemmEngine::multiply_with_bias(const GemmLayout& layout, const void* a, const void* b, DType type,
                                    const float* bias, float* d) {
  if (layout.m == 0 || layout.n == 0 || layout.k == 0) return false;
  const GemmKey key = key_of(layout, a, b, type, d, bias);
  if (key.align_bias < kMinBiasAlignment || no_bias_epilogue_.contains(key)) return false;
  std::optional<Descriptors> desc;
  std::optional<cublasLtMatmulAlgo_t> algo;
  try {  // any refusal of the epilogue (not only "not supported") leaves the plain path
    desc.emplace(layout, cuda_type(type), bias);
    algo = algorithm_for(key, *desc, a, b, 0.0f);
  } catch (const Error& e) {
    spdlog::debug("cuBLASLt refused the bias epilogue for the product {}: {}", describe(key), e.what());
  }
  if (!algo) {
    spdlog::debug("no bias-epilogue algorithm for the product {}: the bias is added apart", describe(key));
    no_bias_epilogue_.insert(key);
    return false;
  }
  run(*desc, *algo, a, b, 0.0f, d);
  return true;
}

void GemmEngine::run(Descriptors& desc, const cublasLtMatmulAlgo_t& algo, const void* a, const void* b,
                     float beta, float* d) {
  const float alpha = 1.0f;
  TM_CUBLAS_CHECK(cublasLtMatmul(handle_.get(), &desc.op, &alpha, a, &desc.a, b, &desc.b, &beta, d, &desc.d,
                                 d, &desc.d, &algo, workspace_.data(), workspace_.bytes(), stream_));
}

void GemmEngine::multiply_padded(const GemmKey& key, const GemmLayout& layout, const void* a, const void* b,
                                 DType type, float* d, bool accumulate) {
  const size_t element = dtype_size(type);
  const GemmLayout p = padded_layout(layout, element);
  const auto u = [](int64_t v) { return static_cast<size_t>(v); };
  // cols columns of rows elements, from leading dimension from_ld to to_ld (in elements).
  const auto copy_columns = [&](void* to, int64_t to_ld, const void* from, int64_t from_ld, int64_t rows,
                                int64_t cols, size_t bytes) {
    TM_CUDA_CHECK(cudaMemcpy2DAsync(to, u(to_ld) * bytes, from, u(from_ld) * bytes, u(rows) * bytes, u(cols),
                                    cudaMemcpyDeviceToDevice, stream_));
  };
  const DeviceBuffer pa = pool_.allocate(u(p.lda) * u(p.a_cols()) * element, "GEMM operand A (aligned copy)");
  const DeviceBuffer pb = pool_.allocate(u(p.ldb) * u(p.b_cols()) * element, "GEMM operand B (aligned copy)");
  const DeviceBuffer pd = pool_.allocate(u(p.ldd) * u(p.n) * sizeof(float), "GEMM output (aligned copy)");
  copy_columns(pa.data(), p.lda, a, layout.lda, layout.a_rows(), layout.a_cols(), element);
  copy_columns(pb.data(), p.ldb, b, layout.ldb, layout.b_rows(), layout.b_cols(), element);
  if (accumulate) copy_columns(pd.data(), p.ldd, d, layout.ldd, layout.m, layout.n, sizeof(float));
  Descriptors desc(p, cuda_type(type));
  auto it = padded_.find(key);
  if (it == padded_.end()) {
    // Pool buffers are at least 256-byte aligned; 16 is all the padded layout promises per column.
    GemmKey aligned = key;
    aligned.align_a = aligned.align_b = aligned.align_d = 16;
    cublasLtMatmulHeuristicResult_t result{};
    if (heuristic(aligned, desc, 1, &result) == 0)
      fail(
          "matmul: cuBLASLt has no algorithm for the product {}, not even on 16-byte-aligned copies; report "
          "this with the output of `tokenmill doctor`",
          describe(key));
    it = padded_.emplace(key, result.algo).first;
  }
  run(desc, it->second, pa.data(), pb.data(), accumulate ? 1.0f : 0.0f, pd.as<float>());
  copy_columns(d, layout.ldd, pd.data(), p.ldd, layout.m, layout.n, sizeof(float));
}

std::optional<cublasLtMatmulAlgo_t> GemmEngine::algorithm_for(const GemmKey& key, Descriptors& desc,
                                                              const void* a, const void* b, float beta) {
  const GemmAlgorithm* cached = cache_.find(key);
  if (cached != nullptr && (cached->tuned || !tune_)) {
    if (checked_.contains(key)) return to_algo(*cached);
    if (usable(desc, *cached)) {  // from the file: cuBLASLt must still accept it
      checked_.insert(key);
      return to_algo(*cached);
    }
  }
  const std::optional<GemmAlgorithm> chosen = choose(key, desc, a, b, beta);
  if (!chosen) return std::nullopt;
  cache_.insert(key, *chosen);
  checked_.insert(key);
  dirty_ = true;
  return to_algo(*chosen);
}

bool GemmEngine::usable(Descriptors& desc, const GemmAlgorithm& algorithm) {
  const cublasLtMatmulAlgo_t algo = to_algo(algorithm);
  cublasLtMatmulHeuristicResult_t result{};
  const cublasStatus_t status =
      cublasLtMatmulAlgoCheck(handle_.get(), &desc.op, &desc.a, &desc.b, &desc.d, &desc.d, &algo, &result);
  return status == CUBLAS_STATUS_SUCCESS && result.workspaceSize <= workspace_.bytes();
}

int GemmEngine::heuristic(const GemmKey& key, Descriptors& desc, int count,
                          cublasLtMatmulHeuristicResult_t* results) {
  cublasLtMatmulPreferenceOpaque_t pref{};
  TM_CUBLAS_CHECK(cublasLtMatmulPreferenceInit(&pref));
  const uint64_t workspace = workspace_.bytes();
  TM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                       &workspace, sizeof(workspace)));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_d},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_d}};
  for (const auto& [attribute, bytes] : alignments)
    TM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(&pref, attribute, &bytes, sizeof(bytes)));
  int returned = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle_.get(), &desc.op, &desc.a, &desc.b, &desc.d, &desc.d, &pref, count, results, &returned);
  // NOT_SUPPORTED is cuBLASLt's answer when no algorithm fits; anything else is an error.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return 0;
  TM_CUBLAS_CHECK(status);
  int usable = 0;
  while (usable < returned && results[usable].state == CUBLAS_STATUS_SUCCESS) ++usable;
  return usable;
}

std::optional<GemmAlgorithm> GemmEngine::choose(const GemmKey& key, Descriptors& desc, const void* a,
                                                const void* b, float beta) {
  cublasLtMatmulHeuristicResult_t results[kTuneCandidates] = {};
  const int returned = heuristic(key, desc, tune_ ? kTuneCandidates : 1, results);
  if (returned == 0) return std::nullopt;
  if (!tune_ || returned == 1) return to_words(results[0].algo, tune_);
  return to_words(fastest(results, returned, desc, a, b, beta), true);
}

cublasLtMatmulAlgo_t GemmEngine::fastest(const cublasLtMatmulHeuristicResult_t* candidates, int count,
                                         Descriptors& desc, const void* a, const void* b, float beta) {
  // Timed into a scratch D (the real one may be accumulated into), in the real D's layout.
  const DeviceBuffer scratch = pool_.allocate(
      static_cast<size_t>(desc.g.ldd) * static_cast<size_t>(desc.g.n) * sizeof(float), "GEMM tuning output");
  const Event start, stop;
  const float alpha = 1.0f;
  float best_ms = std::numeric_limits<float>::infinity();
  int best = 0;
  for (int c = 0; c < count; ++c) {
    const auto run = [&] {
      return cublasLtMatmul(handle_.get(), &desc.op, &alpha, a, &desc.a, b, &desc.b, &beta, scratch.data(),
                            &desc.d, scratch.data(), &desc.d, &candidates[c].algo, workspace_.data(),
                            workspace_.bytes(), stream_);
    };
    if (run() != CUBLAS_STATUS_SUCCESS) continue;  // a candidate that cannot run is not chosen
    TM_CUDA_CHECK(cudaEventRecord(start.get(), stream_));
    for (int r = 0; r < kTuneRuns; ++r) TM_CUBLAS_CHECK(run());
    TM_CUDA_CHECK(cudaEventRecord(stop.get(), stream_));
    TM_CUDA_CHECK(cudaEventSynchronize(stop.get()));
    float ms = 0;
    TM_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    if (ms < best_ms) {
      best_ms = ms;
      best = c;
    }
  }
  return candidates[best].algo;
}

}  // namespace tokenmill::cuda
