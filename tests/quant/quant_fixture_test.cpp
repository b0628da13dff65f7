// Bit-exactness against ggml: decoding every dtype and quantizing every quantisable one
// must reproduce the fixtures in tests/fixtures/quant/ (made by
// tests/fixtures/make_quant_fixtures.py from gguf-py and from ggml's own C quantisers)
// bit for bit, reading and writing at unaligned addresses as a mapped file would.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "quant_test_util.h"

namespace tokenmill::quant {
namespace {

namespace fs = std::filesystem;
using testing::kAllTypes;

const fs::path kDir = fs::path(TOKENMILL_FIXTURES_DIR) / "quant";

struct Case {
  DType type;
  int64_t rows, cols;
  std::vector<unsigned char> quantized;
  std::vector<float> dequantized;
  std::vector<float> source;  // empty: the blocks were not made by quantizing
  std::string label;          // "<type> (<where the numbers come from>)"
};

std::vector<unsigned char> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ADD_FAILURE() << "cannot read " << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<float> read_floats(const fs::path& path) {
  const std::vector<unsigned char> bytes = read_bytes(path);
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

DType dtype_named(const std::string& name) {
  for (DType t : kAllTypes)
    if (dtype_name(t) == name) return t;
  ADD_FAILURE() << "unknown dtype in manifest: " << name;
  return DType::F32;
}

std::vector<Case> load_cases(const char* manifest_name) {
  std::ifstream in(kDir / manifest_name);
  if (!in) {
    ADD_FAILURE() << "cannot read " << (kDir / manifest_name);
    return {};
  }
  const nlohmann::json manifest = nlohmann::json::parse(in);
  std::vector<Case> cases;
  for (const auto& c : manifest.at("cases")) {
    Case x;
    x.type = dtype_named(c.at("type").get<std::string>());
    x.rows = c.at("rows").get<int64_t>();
    x.cols = c.at("cols").get<int64_t>();
    x.quantized = read_bytes(kDir / c.at("quantized").get<std::string>());
    x.dequantized = read_floats(kDir / c.at("dequantized").get<std::string>());
    if (c.contains("source")) x.source = read_floats(kDir / c.at("source").get<std::string>());
    x.label = c.at("type").get<std::string>() + " (" + c.at("reference").get<std::string>() + ")";
    EXPECT_EQ(x.quantized.size(), static_cast<size_t>(x.rows) * dtype_row_bytes(x.type, x.cols)) << x.label;
    EXPECT_EQ(x.dequantized.size(), static_cast<size_t>(x.rows * x.cols)) << x.label;
    if (!x.source.empty()) {
      EXPECT_EQ(x.source.size(), x.dequantized.size()) << x.label;
    }
    cases.push_back(std::move(x));
  }
  return cases;
}

std::vector<Case> all_cases() {
  std::vector<Case> cases = load_cases("manifest.json");
  std::vector<Case> from_ggml = load_cases("manifest_ggml.json");
  std::move(from_ggml.begin(), from_ggml.end(), std::back_inserter(cases));
  return cases;
}

TEST(QuantFixtures, CoverEveryDTypeAndTheKQuantQuantisers) {
  std::set<DType> decoded, quantized;
  for (const Case& c : all_cases()) {
    decoded.insert(c.type);
    if (!c.source.empty()) quantized.insert(c.type);
  }
  for (DType t : kAllTypes) {
    EXPECT_TRUE(decoded.count(t)) << dtype_name(t) << " has no dequantisation fixture";
    EXPECT_TRUE(quantized.count(t)) << dtype_name(t) << " has no quantisation fixture";
  }
}

TEST(QuantFixtures, DequantizeRowIsBitExact) {
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(c.label);
    const size_t row_bytes = dtype_row_bytes(c.type, c.cols);
    for (int64_t r = 0; r < c.rows; ++r) {
      // Read from an odd address, as blocks in a mapped GGUF file may sit.
      std::vector<unsigned char> unaligned(row_bytes + 1);
      std::memcpy(unaligned.data() + 1, c.quantized.data() + static_cast<size_t>(r) * row_bytes, row_bytes);
      std::vector<float> got(static_cast<size_t>(c.cols));
      dequantize_row(c.type, unaligned.data() + 1, got.data(), c.cols);
      const float* want = c.dequantized.data() + r * c.cols;
      const int64_t i = testing::first_bit_difference(got.data(), want, c.cols);
      EXPECT_EQ(i, -1) << "row " << r << ", element " << i << ": got " << got[static_cast<size_t>(i)]
                       << " (0x" << std::hex << f32_to_bits(got[static_cast<size_t>(i)]) << "), want "
                       << std::dec << want[i] << " (0x" << std::hex << f32_to_bits(want[i]) << ")";
    }
  }
}

TEST(QuantFixtures, QuantizeRowIsBitExact) {
  for (const Case& c : all_cases()) {
    if (c.source.empty()) continue;
    SCOPED_TRACE(c.label);
    const size_t row_bytes = dtype_row_bytes(c.type, c.cols);
    for (int64_t r = 0; r < c.rows; ++r) {
      std::vector<unsigned char> unaligned(row_bytes + 3, 0xA5);
      quantize_row(c.type, c.source.data() + r * c.cols, unaligned.data() + 3, c.cols);
      const unsigned char* want = c.quantized.data() + static_cast<size_t>(r) * row_bytes;
      const auto diff = std::mismatch(unaligned.begin() + 3, unaligned.end(), want);
      const auto at = static_cast<size_t>(diff.first - (unaligned.begin() + 3));
      EXPECT_EQ(at, row_bytes) << "row " << r << ": first different byte " << at << " (block "
                               << at / dtype_block_bytes(c.type) << ", byte "
                               << at % dtype_block_bytes(c.type) << "): got " << int{*diff.first} << ", want "
                               << int{*diff.second};
    }
  }
}

}  // namespace
}  // namespace tokenmill::quant
