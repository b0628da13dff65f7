// The cuBLASLt algorithm chosen for each kind of matrix product, kept in memory and in a
// file between runs (the `cudnn.benchmark` idea, persisted). Plain C++: the CPU tests
// exercise the file format (tests/backend/cuda/gemm_algorithm_cache_test.cpp).
//
// File format (little-endian 64-bit words):
//   "TMGEMMLT" (8 bytes), version, words per entry, entry count, FNV-1a of the entries,
//   then per entry: m, n, k, type, trans_a, trans_b, align_a, align_b, align_d, align_bias
//   (0: no bias epilogue), tuned (0/1) and the 8 words of the opaque cublasLtMatmulAlgo_t.
// A file that is not exactly this (wrong magic or version, a count that does not match
// the size or overflows, a bad checksum, a key no GemmEngine would make) is refused whole.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string_view>
#include <vector>

namespace tokenmill::cuda {

// What the choice of algorithm depends on: the column-major shape (gemm_layout.h), the
// cudaDataType_t of A and B (C and D are always f32, the compute type always FP32), the
// transposes, the alignment of each buffer (C is D) and, when cuBLASLt's BIAS epilogue adds
// an f32 bias, the bias's alignment (its heuristic reads the pointer to decide what an
// algorithm may assume).
struct GemmKey {
  int64_t m = 0, n = 0, k = 0;
  int32_t type = 0;
  bool trans_a = false, trans_b = false;
  uint32_t align_a = 0, align_b = 0, align_d = 0;
  uint32_t align_bias = 0;  // 0: no bias epilogue

  auto operator<=>(const GemmKey&) const = default;
};

// The bytes of a cublasLtMatmulAlgo_t (opaque to everyone but cuBLASLt), and whether it was
// the fastest of several timed candidates (TOKENMILL_GEMM_TUNE=1) or cuBLASLt's first guess.
struct GemmAlgorithm {
  std::array<uint64_t, 8> words{};
  bool tuned = false;

  bool operator==(const GemmAlgorithm&) const = default;
};

class GemmAlgorithmCache {
 public:
  static constexpr uint64_t kVersion = 2;  // 2: align_bias

  // The algorithm stored for `key`, or null.
  const GemmAlgorithm* find(const GemmKey& key) const;
  // Stores (or replaces) the algorithm for `key`.
  void insert(const GemmKey& key, const GemmAlgorithm& algorithm);
  // Adds the entries of `other` whose keys this cache lacks.
  void add_missing(const GemmAlgorithmCache& other);
  size_t size() const { return entries_.size(); }

  // The file's bytes (entries in key order, so equal caches give equal files).
  std::vector<uint8_t> serialize() const;
  // The cache in `bytes`; Error saying what is wrong when they are not a valid file.
  static GemmAlgorithmCache parse(std::span<const uint8_t> bytes);

 private:
  std::map<GemmKey, GemmAlgorithm> entries_;
};

// The cache stored at `path`: empty when there is no file; a file that cannot be read or
// is not valid is ignored with a warning (the next save replaces it).
GemmAlgorithmCache load_gemm_algorithm_cache(const std::filesystem::path& path);
// Writes `cache`, plus the entries of a valid file already at `path` that it lacks (another
// process may have saved since this one loaded), to `path`: atomically (core/atomic_file.h,
// through a temporary of this process and thread, so that concurrent savers never share
// one), creating the directory. Error on failure.
void save_gemm_algorithm_cache(const GemmAlgorithmCache& cache, const std::filesystem::path& path);

// <cache home>/tokenmill/gemm-algorithms-<gpu>-sm<major><minor>-cublasLt<version>.bin, where the
// cache home is `xdg_cache_home`, else `home`/.cache (null or empty: unset); empty when
// both are unset. Characters of the GPU name outside [A-Za-z0-9._-] become '_'.
std::filesystem::path gemm_algorithm_cache_path(const char* xdg_cache_home, const char* home,
                                                std::string_view gpu_name, int major, int minor,
                                                size_t cublaslt_version);

}  // namespace tokenmill::cuda
