// gemm_algorithm_cache.h: the file format round-trips, and every malformed file (garbage,
// truncated, wrong magic or version, counts that overflow or disagree with the size, a
// damaged body, impossible keys) is refused; loading such a file gives an empty cache and
// the next save replaces it. And where the file lives.
#include "backend/cuda/gemm_algorithm_cache.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "support/temp_dir.h"

namespace tokenmill::cuda {
namespace {

constexpr size_t kHeaderBytes = 8 + 4 * 8;
constexpr size_t kEntryBytes = 19 * 8;

GemmKey key(int64_t m, int64_t n, int64_t k, uint32_t align_a = 256) {
  return GemmKey{.m = m,
                 .n = n,
                 .k = k,
                 .type = 14,  // CUDA_R_16BF
                 .trans_a = true,
                 .trans_b = false,
                 .align_a = align_a,
                 .align_b = 4,
                 .align_d = 16};
}

// The key of the same product with the bias epilogue (a 16-byte-aligned bias).
GemmKey biased(GemmKey k) {
  k.align_bias = 16;
  return k;
}

GemmAlgorithm algorithm(uint64_t seed, bool tuned = false) {
  GemmAlgorithm a;
  for (size_t i = 0; i < a.words.size(); ++i) a.words[i] = seed * 0x9e3779b97f4a7c15ull + i;
  a.tuned = tuned;
  return a;
}

GemmAlgorithmCache sample_cache() {
  GemmAlgorithmCache cache;
  cache.insert(key(768, 37, 300), algorithm(1));
  cache.insert(key(1, 1, 1, 2), algorithm(2, true));
  cache.insert(biased(key(50257, 1024, 768)), algorithm(3));
  return cache;
}

void put_word(std::vector<uint8_t>& bytes, size_t offset, uint64_t word) {
  for (int i = 0; i < 8; ++i) bytes[offset + static_cast<size_t>(i)] = static_cast<uint8_t>(word >> (8 * i));
}

TEST(GemmAlgorithmCache, FindsWhatWasInsertedAndReplaces) {
  GemmAlgorithmCache cache;
  EXPECT_EQ(cache.find(key(2, 3, 4)), nullptr);
  cache.insert(key(2, 3, 4), algorithm(7));
  ASSERT_NE(cache.find(key(2, 3, 4)), nullptr);
  EXPECT_EQ(*cache.find(key(2, 3, 4)), algorithm(7));
  EXPECT_EQ(cache.find(key(2, 3, 4, 8)), nullptr) << "another alignment is another key";
  EXPECT_EQ(cache.find(biased(key(2, 3, 4))), nullptr) << "the bias epilogue is another key";
  cache.insert(key(2, 3, 4), algorithm(8, true));
  EXPECT_EQ(*cache.find(key(2, 3, 4)), algorithm(8, true));
  EXPECT_EQ(cache.size(), 1u);
}

TEST(GemmAlgorithmCache, RoundTripsThroughBytes) {
  const GemmAlgorithmCache cache = sample_cache();
  const std::vector<uint8_t> bytes = cache.serialize();
  EXPECT_EQ(bytes.size(), kHeaderBytes + 3 * kEntryBytes);
  const GemmAlgorithmCache back = GemmAlgorithmCache::parse(bytes);
  EXPECT_EQ(back.size(), 3u);
  for (const auto& [k, a] :
       {std::pair{key(768, 37, 300), algorithm(1)}, std::pair{key(1, 1, 1, 2), algorithm(2, true)},
        std::pair{biased(key(50257, 1024, 768)), algorithm(3)}}) {
    ASSERT_NE(back.find(k), nullptr);
    EXPECT_EQ(*back.find(k), a);
  }
  EXPECT_EQ(back.serialize(), bytes) << "equal caches give equal files";
  EXPECT_EQ(GemmAlgorithmCache::parse(GemmAlgorithmCache().serialize()).size(), 0u);
}

TEST(GemmAlgorithmCache, RefusesGarbageAndTruncatedFiles) {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int> byte(0, 255);
  for (const size_t size : {size_t{0}, size_t{7}, size_t{39}, size_t{40}, size_t{184}, size_t{4096}}) {
    std::vector<uint8_t> garbage(size);
    for (uint8_t& b : garbage) b = static_cast<uint8_t>(byte(rng));
    EXPECT_THROW(GemmAlgorithmCache::parse(garbage), Error) << size << " random bytes";
  }
  const std::vector<uint8_t> bytes = sample_cache().serialize();
  for (const size_t cut :
       {size_t{1}, size_t{8}, kHeaderBytes, kHeaderBytes + 1, bytes.size() - kEntryBytes, bytes.size() - 1}) {
    EXPECT_THROW(GemmAlgorithmCache::parse(std::span(bytes).first(cut)), Error) << "cut to " << cut;
  }
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_THROW(GemmAlgorithmCache::parse(longer), Error) << "a trailing byte";
}

TEST(GemmAlgorithmCache, RefusesWrongMagicVersionAndEntrySize) {
  const std::vector<uint8_t> good = sample_cache().serialize();
  std::vector<uint8_t> bytes = good;
  bytes[0] = 'X';
  EXPECT_THROW(GemmAlgorithmCache::parse(bytes), Error) << "magic";
  bytes = good;
  put_word(bytes, 8, GemmAlgorithmCache::kVersion + 1);
  EXPECT_THROW(GemmAlgorithmCache::parse(bytes), Error) << "version";
  bytes = good;
  put_word(bytes, 16, 17);
  EXPECT_THROW(GemmAlgorithmCache::parse(bytes), Error) << "words per entry";
}

TEST(GemmAlgorithmCache, RefusesCountsThatOverflowOrDisagreeWithTheSize) {
  const std::vector<uint8_t> good = sample_cache().serialize();
  for (const uint64_t count : {uint64_t{2}, uint64_t{4}, ~uint64_t{0}, ~uint64_t{0} / kEntryBytes + 1,
                               (~uint64_t{0} - kHeaderBytes) / kEntryBytes + 1, uint64_t{1} << 61}) {
    std::vector<uint8_t> bytes = good;
    put_word(bytes, 24, count);
    EXPECT_THROW(GemmAlgorithmCache::parse(bytes), Error) << "count " << count;
  }
}

TEST(GemmAlgorithmCache, RefusesADamagedBody) {
  std::vector<uint8_t> bytes = sample_cache().serialize();
  bytes[kHeaderBytes + kEntryBytes + 100] ^= 1;  // an algorithm bit: only the checksum sees it
  EXPECT_THROW(GemmAlgorithmCache::parse(bytes), Error);
}

// A body whose checksum is right but whose key no engine makes.
TEST(GemmAlgorithmCache, RefusesImpossibleKeys) {
  const auto with_key = [](const GemmKey& k, uint64_t tuned = 0, uint64_t align_bias = 0) {
    GemmAlgorithmCache cache;
    cache.insert(k, algorithm(1));
    std::vector<uint8_t> bytes = cache.serialize();
    put_word(bytes, kHeaderBytes + 9 * 8, align_bias);
    put_word(bytes, kHeaderBytes + 10 * 8, tuned);
    // Recompute the checksum over the edited body (FNV-1a, as the format says).
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = kHeaderBytes; i < bytes.size(); ++i) h = (h ^ bytes[i]) * 0x100000001b3ull;
    put_word(bytes, 32, h);
    return bytes;
  };
  EXPECT_NO_THROW(GemmAlgorithmCache::parse(with_key(key(1, 2, 3))));
  EXPECT_THROW(GemmAlgorithmCache::parse(with_key(key(0, 2, 3))), Error) << "empty dimension";
  EXPECT_THROW(GemmAlgorithmCache::parse(with_key(key(-1, 2, 3))), Error) << "negative dimension";
  EXPECT_THROW(GemmAlgorithmCache::parse(with_key(key(1, 2, 3, 3))), Error) << "alignment 3";
  EXPECT_THROW(GemmAlgorithmCache::parse(with_key(key(1, 2, 3, 512))), Error) << "alignment 512";
  GemmKey negative_type = key(1, 2, 3);
  negative_type.type = -1;
  EXPECT_THROW(GemmAlgorithmCache::parse(with_key(negative_type)), Error) << "data type";
  EXPECT_THROW(GemmAlgorithmCache::parse(with_key(key(1, 2, 3), 2)), Error) << "tuned flag 2";
  EXPECT_NO_THROW(GemmAlgorithmCache::parse(with_key(key(1, 2, 3), 0, 16)));
  EXPECT_THROW(GemmAlgorithmCache::parse(with_key(key(1, 2, 3), 0, 3)), Error) << "bias alignment 3";
  EXPECT_THROW(GemmAlgorithmCache::parse(with_key(key(1, 2, 3), 0, 512)), Error) << "bias alignment 512";
}

class GemmAlgorithmCacheFile : public ::testing::Test {
 protected:
  tokenmill::testing::TempDir temp_;
  const std::filesystem::path dir_ = temp_.path();
};

TEST_F(GemmAlgorithmCacheFile, SavesAndLoadsCreatingTheDirectory) {
  const std::filesystem::path path = dir_ / "nested" / "cache.bin";
  EXPECT_EQ(load_gemm_algorithm_cache(path).size(), 0u) << "no file: an empty cache";
  save_gemm_algorithm_cache(sample_cache(), path);
  const GemmAlgorithmCache loaded = load_gemm_algorithm_cache(path);
  EXPECT_EQ(loaded.serialize(), sample_cache().serialize());
}

// A process saving keeps what another one saved after it loaded; its own entries win.
TEST_F(GemmAlgorithmCacheFile, SavingKeepsTheEntriesAlreadyInTheFile) {
  const std::filesystem::path path = dir_ / "cache.bin";
  GemmAlgorithmCache first;
  first.insert(key(1, 2, 3), algorithm(1));
  first.insert(key(4, 5, 6), algorithm(2));
  save_gemm_algorithm_cache(first, path);
  GemmAlgorithmCache second;
  second.insert(key(4, 5, 6), algorithm(3, true));
  second.insert(key(7, 8, 9), algorithm(4));
  save_gemm_algorithm_cache(second, path);
  const GemmAlgorithmCache loaded = load_gemm_algorithm_cache(path);
  EXPECT_EQ(loaded.size(), 3u);
  ASSERT_NE(loaded.find(key(1, 2, 3)), nullptr);
  EXPECT_EQ(*loaded.find(key(1, 2, 3)), algorithm(1));
  ASSERT_NE(loaded.find(key(4, 5, 6)), nullptr);
  EXPECT_EQ(*loaded.find(key(4, 5, 6)), algorithm(3, true));
  ASSERT_NE(loaded.find(key(7, 8, 9)), nullptr);
  EXPECT_EQ(*loaded.find(key(7, 8, 9)), algorithm(4));
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir_))
    files.push_back(entry.path().filename());
  EXPECT_EQ(files, std::vector<std::filesystem::path>{"cache.bin"}) << "a temporary was left behind";
}

TEST_F(GemmAlgorithmCacheFile, ABadFileIsIgnoredAndRewritten) {
  const std::filesystem::path path = dir_ / "cache.bin";
  {
    std::ofstream out(path, std::ios::binary);
    out << "not a cache at all";
  }
  EXPECT_EQ(load_gemm_algorithm_cache(path).size(), 0u);
  save_gemm_algorithm_cache(sample_cache(), path);
  EXPECT_EQ(load_gemm_algorithm_cache(path).size(), 3u);
}

TEST(GemmAlgorithmCachePath, PrefersXdgCacheHomeThenHome) {
  EXPECT_EQ(
      gemm_algorithm_cache_path("/xdg", "/home/u", "NVIDIA H100 80GB HBM3", 9, 0, 130001),
      std::filesystem::path("/xdg/tokenmill/gemm-algorithms-NVIDIA_H100_80GB_HBM3-sm90-cublasLt130001.bin"));
  EXPECT_EQ(gemm_algorithm_cache_path("", "/home/u", "A100/SXM4", 8, 0, 7),
            std::filesystem::path("/home/u/.cache/tokenmill/gemm-algorithms-A100_SXM4-sm80-cublasLt7.bin"));
  EXPECT_EQ(gemm_algorithm_cache_path(nullptr, "/home/u", "L4", 8, 9, 7),
            std::filesystem::path("/home/u/.cache/tokenmill/gemm-algorithms-L4-sm89-cublasLt7.bin"));
  EXPECT_TRUE(gemm_algorithm_cache_path(nullptr, nullptr, "L4", 8, 9, 7).empty());
  EXPECT_TRUE(gemm_algorithm_cache_path("", "", "L4", 8, 9, 7).empty());
}

}  // namespace
}  // namespace tokenmill::cuda
