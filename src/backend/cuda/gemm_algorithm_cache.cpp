#include "backend/cuda/gemm_algorithm_cache.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <thread>

#include "core/atomic_file.h"
#include "core/checked_math.h"
#include "core/error.h"
#include "core/fnv1a.h"

namespace tokenmill::cuda {

namespace {

constexpr char kMagic[8] = {'T', 'M', 'G', 'E', 'M', 'M', 'L', 'T'};
constexpr uint64_t kHeaderWords = 4;  // version, words per entry, count, checksum
constexpr uint64_t kKeyWords = 10;
constexpr uint64_t kAlgorithmWords = std::tuple_size_v<decltype(GemmAlgorithm::words)>;
constexpr uint64_t kEntryWords = kKeyWords + 1 + kAlgorithmWords;  // key, tuned, algorithm
constexpr uint64_t kHeaderBytes = sizeof(kMagic) + kHeaderWords * 8;
constexpr uint64_t kMaxFileBytes = uint64_t{64} << 20;  // far above any real cache

void put(std::vector<uint8_t>& out, uint64_t word) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(word >> (8 * i)));
}

uint64_t get(std::span<const uint8_t> bytes, uint64_t word_offset) {
  uint64_t word = 0;
  for (int i = 7; i >= 0; --i) word = word << 8 | bytes[word_offset * 8 + static_cast<uint64_t>(i)];
  return word;
}

bool valid_alignment(uint64_t a) { return a >= 1 && a <= 256 && (a & (a - 1)) == 0; }

// The key in words [0, kKeyWords) of `e`; Error when no GemmEngine makes such a key.
GemmKey parse_key(std::span<const uint8_t> e, uint64_t index) {
  const auto word = [&](uint64_t i) { return get(e, i); };
  for (uint64_t i = 0; i < 3; ++i)
    if (word(i) < 1 || word(i) > static_cast<uint64_t>(INT64_MAX))
      fail("entry {}: a dimension is {}", index, word(i));
  if (word(3) > static_cast<uint64_t>(INT32_MAX)) fail("entry {}: data type {} is not valid", index, word(3));
  for (uint64_t i = 4; i < 6; ++i)
    if (word(i) > 1) fail("entry {}: transpose flag {} is not 0 or 1", index, word(i));
  for (uint64_t i = 6; i < 9; ++i)
    if (!valid_alignment(word(i)))
      fail("entry {}: alignment {} is not a power of two <= 256", index, word(i));
  if (word(9) != 0 && !valid_alignment(word(9)))
    fail("entry {}: bias alignment {} is not 0 or a power of two <= 256", index, word(9));
  return GemmKey{.m = static_cast<int64_t>(word(0)),
                 .n = static_cast<int64_t>(word(1)),
                 .k = static_cast<int64_t>(word(2)),
                 .type = static_cast<int32_t>(word(3)),
                 .trans_a = word(4) == 1,
                 .trans_b = word(5) == 1,
                 .align_a = static_cast<uint32_t>(word(6)),
                 .align_b = static_cast<uint32_t>(word(7)),
                 .align_d = static_cast<uint32_t>(word(8)),
                 .align_bias = static_cast<uint32_t>(word(9))};
}

std::string file_name_part(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    const bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    if (!keep) c = '_';
  }
  return out;
}

}  // namespace

const GemmAlgorithm* GemmAlgorithmCache::find(const GemmKey& key) const {
  const auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

void GemmAlgorithmCache::insert(const GemmKey& key, const GemmAlgorithm& algorithm) {
  entries_[key] = algorithm;
}

void GemmAlgorithmCache::add_missing(const GemmAlgorithmCache& other) {
  entries_.insert(other.entries_.begin(), other.entries_.end());
}

std::vector<uint8_t> GemmAlgorithmCache::serialize() const {
  std::vector<uint8_t> body;
  for (const auto& [key, algorithm] : entries_) {
    for (const int64_t v : {key.m, key.n, key.k}) put(body, static_cast<uint64_t>(v));
    put(body, static_cast<uint64_t>(key.type));
    put(body, key.trans_a ? 1 : 0);
    put(body, key.trans_b ? 1 : 0);
    for (const uint32_t v : {key.align_a, key.align_b, key.align_d, key.align_bias}) put(body, v);
    put(body, algorithm.tuned ? 1 : 0);
    for (const uint64_t word : algorithm.words) put(body, word);
  }
  std::vector<uint8_t> file(std::begin(kMagic), std::end(kMagic));
  put(file, kVersion);
  put(file, kEntryWords);
  put(file, entries_.size());
  put(file, fnv1a(body.data(), body.size()));
  file.insert(file.end(), body.begin(), body.end());
  return file;
}

GemmAlgorithmCache GemmAlgorithmCache::parse(std::span<const uint8_t> bytes) {
  if (bytes.size() < kHeaderBytes)
    fail("{} bytes is shorter than the {}-byte header", bytes.size(), kHeaderBytes);
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) fail("not a GEMM algorithm cache (bad magic)");
  const std::span<const uint8_t> header = bytes.subspan(sizeof(kMagic));
  const uint64_t version = get(header, 0), entry_words = get(header, 1), count = get(header, 2);
  if (version != kVersion) fail("version {}, expected {}", version, kVersion);
  if (entry_words != kEntryWords) fail("{} words per entry, expected {}", entry_words, kEntryWords);
  const uint64_t body_bytes = checked_mul(count, kEntryWords * 8, "GEMM algorithm cache entries");
  if (checked_add(body_bytes, kHeaderBytes, "GEMM algorithm cache size") != bytes.size())
    fail("{} entries need {} bytes after the header, the file has {}", count, body_bytes,
         bytes.size() - kHeaderBytes);
  const std::span<const uint8_t> body = bytes.subspan(kHeaderBytes);
  if (fnv1a(body.data(), body.size()) != get(header, 3)) fail("the checksum does not match (damaged file)");
  GemmAlgorithmCache cache;
  for (uint64_t i = 0; i < count; ++i) {
    const std::span<const uint8_t> entry = body.subspan(i * kEntryWords * 8, kEntryWords * 8);
    const uint64_t tuned = get(entry, kKeyWords);
    if (tuned > 1) fail("entry {}: tuned flag {} is not 0 or 1", i, tuned);
    GemmAlgorithm algorithm;
    algorithm.tuned = tuned == 1;
    for (size_t w = 0; w < kAlgorithmWords; ++w) algorithm.words[w] = get(entry, kKeyWords + 1 + w);
    cache.insert(parse_key(entry, i), algorithm);
  }
  return cache;
}

GemmAlgorithmCache load_gemm_algorithm_cache(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return {};
  try {
    const uint64_t size = std::filesystem::file_size(path, ec);
    if (ec) fail("cannot read its size ({})", ec.message());
    if (size > kMaxFileBytes) fail("{} bytes is larger than any cache this version writes", size);
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> bytes(static_cast<size_t>(size));
    if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size)))
      fail("cannot read it");
    return GemmAlgorithmCache::parse(bytes);
  } catch (const Error& e) {
    spdlog::warn("ignoring the GEMM algorithm cache {}: {}; it will be rewritten", path.string(), e.what());
    return {};
  }
}

void save_gemm_algorithm_cache(const GemmAlgorithmCache& cache, const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec)
    fail("cannot create {} for the GEMM algorithm cache: {}", path.parent_path().string(), ec.message());
  GemmAlgorithmCache merged = cache;
  merged.add_missing(load_gemm_algorithm_cache(path));
  const std::vector<uint8_t> bytes = merged.serialize();
  const std::filesystem::path own = fmt::format("{}.{}-{}", path.string(), ::getpid(),
                                                std::hash<std::thread::id>{}(std::this_thread::get_id()));
  AtomicFile file(own);
  file.write(bytes.data(), bytes.size());
  file.commit();
  std::filesystem::rename(own, path, ec);
  if (ec) {
    const std::string reason = ec.message();
    std::filesystem::remove(own, ec);
    fail("cannot rename {} to {}: {}", own.string(), path.string(), reason);
  }
}

std::filesystem::path gemm_algorithm_cache_path(const char* xdg_cache_home, const char* home,
                                                std::string_view gpu_name, int major, int minor,
                                                size_t cublaslt_version) {
  std::filesystem::path root;
  if (xdg_cache_home != nullptr && *xdg_cache_home != '\0') {
    root = xdg_cache_home;
  } else if (home != nullptr && *home != '\0') {
    root = std::filesystem::path(home) / ".cache";
  } else {
    return {};
  }
  return root / "tokenmill" /
         fmt::format("gemm-algorithms-{}-sm{}{}-cublasLt{}.bin", file_name_part(gpu_name), major, minor,
                     cublaslt_version);
}

}  // namespace tokenmill::cuda
