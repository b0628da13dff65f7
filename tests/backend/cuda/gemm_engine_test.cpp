// GemmEngine on a GPU (skipped without one): TOKENMILL_GEMM_TUNE=1 times the candidates and
// marks its choice as tuned in the cache file, which a later engine (tuning or not) reuses
// for the same bits without rewriting the file; a damaged file is ignored and rewritten; an
// aligned f32 bias gets a product (and an algorithm) with cuBLASLt's bias epilogue.
// The conformance suite (tests/backend) checks the products themselves on every shape.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backend/conformance_harness.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/gemm_algorithm_cache.h"
#include "backend/matmul_activations.h"
#include "backend/reference/reference_ops.h"
#include "support/scoped_env.h"
#include "support/temp_dir.h"

namespace tokenmill::testing {
namespace {

std::vector<uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

class GemmEngineOnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = cuda::unavailable_reason();
    if (!why.empty()) GTEST_SKIP() << "no usable GPU: " << why;
    dir_.emplace();
    cache_home_.emplace("XDG_CACHE_HOME", dir_->path().c_str());
  }

  // y = x . w^T (x [37, 300] f32, w [130, 300] bf16, both one element past alignment) on a
  // fresh backend, checked against the reference; the backend (and its engine, which
  // saves the cache) is gone when this returns.
  std::vector<float> run_matmul() {
    const BackendUnderTest cuda = cuda_backend_under_test();
    const std::unique_ptr<Backend> backend = cuda.make();
    std::mt19937_64 rng(42);
    GuardedBuffer x(cuda, DType::F32, {37, 300}, 4), w(cuda, DType::BF16, {130, 300}, 2),
        y(cuda, DType::F32, {37, 130});
    x.fill_random(rng);
    w.fill_random(rng);
    y.fill(NAN);
    backend->matmul(x.tensor(), w.tensor(), nullptr, y.tensor());
    const MatmulActivations x_read(cuda, x, DType::BF16);
    EXPECT_TRUE(
        close_to_reference(y.values(), reference::matmul(x_read.tensor(), w.tensor(), nullptr), 1e-5));
    return y.values();
  }

  // The one cache file under the test's cache home.
  std::filesystem::path cache_file() const {
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir_->path() / "tokenmill"))
      if (entry.path().extension() == ".bin") files.push_back(entry.path());
    EXPECT_EQ(files.size(), 1u);
    return files.empty() ? std::filesystem::path() : files.front();
  }

  std::optional<TempDir> dir_;
  std::optional<ScopedEnv> cache_home_;  // destroyed first: restored before dir_ goes
};

TEST_F(GemmEngineOnGpu, TunedChoicesArePersistedAndReusedBitForBit) {
  std::vector<float> tuned;
  {
    const ScopedEnv tune("TOKENMILL_GEMM_TUNE", "1");
    tuned = run_matmul();
  }
  const std::filesystem::path file = cache_file();
  const std::vector<uint8_t> bytes = read_bytes(file);
  EXPECT_EQ(cuda::GemmAlgorithmCache::parse(bytes).size(), 1u);
  // The tuned flag of the only entry: word 10 of the entry, after the 40-byte header.
  ASSERT_GE(bytes.size(), 40u + 11 * 8);
  EXPECT_EQ(bytes[40 + 10 * 8], 1) << "the choice is not marked as tuned";
  const ScopedEnv no_tune("TOKENMILL_GEMM_TUNE", nullptr);
  EXPECT_EQ(run_matmul(), tuned) << "the cached algorithm gives other bits";
  EXPECT_EQ(read_bytes(file), bytes) << "a cache with nothing new was rewritten";
}

// Operands aligned as the loaders place them. The biased product has a cache entry of its
// own only when it ran with the epilogue (the other path adds the bias with beta = 1 to the
// same product as the unbiased one, under the same key).
TEST_F(GemmEngineOnGpu, AnAlignedF32BiasIsAddedInTheEpilogue) {
  const ScopedEnv no_tune("TOKENMILL_GEMM_TUNE", nullptr);
  {
    const BackendUnderTest cuda = cuda_backend_under_test();
    const std::unique_ptr<Backend> backend = cuda.make();
    std::mt19937_64 rng(7);
    GuardedBuffer x(cuda, DType::F32, {37, 300}), w(cuda, DType::BF16, {130, 300}),
        bias(cuda, DType::F32, {130}), y(cuda, DType::F32, {37, 130});
    x.fill_random(rng);
    w.fill_random(rng);
    bias.fill_random(rng);
    y.fill(NAN);
    backend->matmul(x.tensor(), w.tensor(), nullptr, y.tensor());
    backend->matmul(x.tensor(), w.tensor(), bias.ptr(), y.tensor());
    const MatmulActivations x_read(cuda, x, DType::BF16);
    EXPECT_TRUE(
        close_to_reference(y.values(), reference::matmul(x_read.tensor(), w.tensor(), bias.ptr()), 1e-5));
  }
  EXPECT_EQ(cuda::GemmAlgorithmCache::parse(read_bytes(cache_file())).size(), 2u)
      << "the biased product did not run with the epilogue";
}

TEST_F(GemmEngineOnGpu, ADamagedCacheFileIsIgnoredAndRewritten) {
  const ScopedEnv no_tune("TOKENMILL_GEMM_TUNE", nullptr);
  const std::vector<float> first = run_matmul();
  const std::filesystem::path file = cache_file();
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << "TMGEMMLT but then nothing valid";
  }
  EXPECT_EQ(run_matmul(), first);
  EXPECT_EQ(cuda::GemmAlgorithmCache::parse(read_bytes(file)).size(), 1u)
      << "the damaged file was not rewritten";
}

}  // namespace
}  // namespace tokenmill::testing
