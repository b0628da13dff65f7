// GemmEngine: the CUDA backend's matrix products through cuBLASLt (owned by the linear-ops
// family: cuda_linear_ops.cpp).
//
// Every product is FP32 compute (CUBLAS_COMPUTE_32F, never TF32) with f32 output; A and B
// are both f32 (full FP32 GEMM) or both bf16/f16 (tensor cores, FP32 accumulation). The
// algorithm of each kind of product (GemmKey: shape, type, transposes, buffer alignments,
// bias epilogue) is chosen once, by cuBLASLt's heuristic (its first answer) or, with
// TOKENMILL_GEMM_TUNE=1, by timing its top candidates (the host then waits for the GPU,
// once per new kind of product), and cached in memory and, between runs, in a file
// (gemm_algorithm_cache.h) written when the engine is destroyed.
//
// A bias is added by cuBLASLt's BIAS epilogue where it can be (multiply_with_bias); the
// epilogue is part of the key, so its algorithms are chosen, tuned and cached alike.
//
// A product cuBLASLt has no algorithm for as it is (an odd leading dimension or a buffer
// only 2-byte aligned, which the conformance suite passes on purpose) is computed on
// 16-byte-aligned copies (gemm_layout.h's padded_layout): A and B copied in, D copied in
// when accumulating and out after; the algorithm for those copies is cuBLASLt's first
// answer, kept in memory only.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "backend/cuda/cuda_owners.h"
#include "backend/cuda/device_pool.h"
#include "backend/cuda/gemm_algorithm_cache.h"
#include "backend/cuda/gemm_layout.h"
#include "core/dtype.h"

namespace tokenmill::cuda {

class GemmEngine {
 public:
  // Products queued on `stream`; the workspace comes from `pool` (both outlive the engine).
  GemmEngine(cudaStream_t stream, DevicePool& pool);
  ~GemmEngine();
  GemmEngine(const GemmEngine&) = delete;
  GemmEngine& operator=(const GemmEngine&) = delete;

  // D = op(A) . op(B), or D += op(A) . op(B) when `accumulate`, in `layout`'s column-major
  // terms; A and B of `type` (f32, bf16 or f16), D f32, all at any element-aligned address.
  // An empty sum (k == 0) writes zeros, or leaves D as it is when accumulating.
  void multiply(const GemmLayout& layout, const void* a, const void* b, DType type, float* d,
                bool accumulate);

  // D = op(A) . op(B) + bias, bias[i] added to row i of D (in row-major terms: to output
  // column i of every token), by cuBLASLt's BIAS epilogue, in one pass over D; `bias` is
  // f32. Returns false, having queued nothing, for an empty sum (k == 0), a bias aligned to
  // less than 16 bytes (the epilogue's kernels assume 16), or when cuBLASLt has no such
  // algorithm for this product as it is, or refuses the epilogue: the caller then adds the
  // bias itself (and the engine does not ask again for this kind of product).
  bool multiply_with_bias(const GemmLayout& layout, const void* a, const void* b, DType type,
                          const float* bias, float* d);

 private:
  struct Descriptors;
  // The algorithm for `key`: cached (and accepted by cuBLASLt in this process), else chosen
  // now; none when cuBLASLt has none for this product.
  std::optional<cublasLtMatmulAlgo_t> algorithm_for(const GemmKey& key, Descriptors& desc, const void* a,
                                                    const void* b, float beta);
  bool usable(Descriptors& desc, const GemmAlgorithm& algorithm);
  std::optional<GemmAlgorithm> choose(const GemmKey& key, Descriptors& desc, const void* a, const void* b,
                                      float beta);
  // Up to `count` of cuBLASLt's candidates for buffers aligned as `key` says, best first.
  int heuristic(const GemmKey& key, Descriptors& desc, int count, cublasLtMatmulHeuristicResult_t* results);
  // The product `key` (cuBLASLt has no algorithm for it as it is) on 16-byte-aligned copies.
  void multiply_padded(const GemmKey& key, const GemmLayout& layout, const void* a, const void* b, DType type,
                       float* d, bool accumulate);
  void run(Descriptors& desc, const cublasLtMatmulAlgo_t& algo, const void* a, const void* b, float beta,
           float* d);
  // The fastest of `candidates` for this product, timed into a scratch D.
  cublasLtMatmulAlgo_t fastest(const cublasLtMatmulHeuristicResult_t* candidates, int count,
                               Descriptors& desc, const void* a, const void* b, float beta);

  cudaStream_t stream_;
  DevicePool& pool_;
  CublasLtOwner handle_;
  DeviceBuffer workspace_;
  bool tune_ = false;
  std::filesystem::path cache_path_;  // empty: not persisted
  GemmAlgorithmCache cache_;
  std::set<GemmKey> checked_;  // keys whose cached algorithm cuBLASLt accepted in this process
  std::map<GemmKey, cublasLtMatmulAlgo_t> padded_;  // products computed on aligned copies
  std::set<GemmKey> no_bias_epilogue_;              // bias products cuBLASLt has no algorithm for
  bool dirty_ = false;                              // cache_ has entries the file lacks
};

}  // namespace tokenmill::cuda
