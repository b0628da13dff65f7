// Tests for the safetensors parser, the (sharded) archive and MappedFile.
//
// Every file is built here, in memory or in a private temporary directory, so the
// bad-input cases say exactly which byte is wrong.
#include "formats/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace tokenmill {
namespace {

using testing::expect_error;

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kLabel = "test.safetensors";

// 8-byte little-endian length, then the header, then the data region. With `align`,
// the header is padded with spaces (as the reference writer does) so that the data
// region starts at a multiple of 8.
std::string make_file(std::string header, const std::string& data = "", bool align = false) {
  if (align) {
    while ((8 + header.size()) % 8 != 0) header += ' ';
  }
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

// A raw header length prefix followed by arbitrary bytes.
std::string with_length(uint64_t n, const std::string& rest) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + rest;
}

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

std::vector<SafetensorsEntry> parse(const std::string& file) {
  return parse_safetensors(as_bytes(file), kLabel);
}

json entry(const std::string& dtype, const json& shape, uint64_t begin, uint64_t end) {
  return json{{"dtype", dtype}, {"shape", shape}, {"data_offsets", {begin, end}}};
}

void expect_parse_error(const std::string& file, std::initializer_list<std::string> parts) {
  std::vector<std::string> all(parts);
  all.push_back(kLabel);
  expect_error([&] { parse(file); }, all);
}

// Element encoders (the bytes a writer would produce on a little-endian machine).
std::string f32_bytes(std::initializer_list<float> values) {
  std::string out;
  for (float v : values) out.append(reinterpret_cast<const char*>(&v), 4);
  return out;
}
std::string u16_bytes(const std::vector<uint16_t>& values) {
  std::string out;
  for (uint16_t v : values) out.append(reinterpret_cast<const char*>(&v), 2);
  return out;
}
std::string bf16_bytes(std::initializer_list<float> values) {
  std::vector<uint16_t> h;
  for (float v : values) h.push_back(f32_to_bf16(v));
  return u16_bytes(h);
}
std::string f16_bytes(std::initializer_list<float> values) {
  std::vector<uint16_t> h;
  for (float v : values) h.push_back(f32_to_f16(v));
  return u16_bytes(h);
}

using testing::TempDir;

float load_as_f32_at(const Tensor& t, size_t i) { return load_as_f32(t.data, t.dtype, i); }

// ---------------------------------------------------------------------------------------
// Valid files

TEST(safetensors_parse, ValidFileGivesEntriesInFileOrder) {
  json h;
  h["b"] = entry("BF16", {2}, 24, 28);
  h["a"] = entry("F32", {2, 3}, 0, 24);
  h["c"] = entry("I64", {1}, 28, 36);
  h["__metadata__"] = {{"format", "pt"}};
  const std::string header = h.dump();
  const std::string file = make_file(header, std::string(36, 'x'));
  const auto entries = parse(file);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].name, "a");
  EXPECT_EQ(entries[0].dtype_name, "F32");
  EXPECT_EQ(entries[0].dtype, DType::F32);
  EXPECT_EQ(entries[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(entries[0].offset, 8 + header.size());
  EXPECT_EQ(entries[0].nbytes, 24u);
  EXPECT_EQ(entries[1].name, "b");
  EXPECT_EQ(entries[1].dtype, DType::BF16);
  EXPECT_EQ(entries[1].offset, 8 + header.size() + 24);
  EXPECT_EQ(entries[2].name, "c");
  EXPECT_EQ(entries[2].dtype_name, "I64");
  EXPECT_FALSE(entries[2].dtype.has_value());
  EXPECT_EQ(entries[2].nbytes, 8u);
}

TEST(safetensors_parse, EveryKnownDtypeHasItsElementSize) {
  const std::vector<std::pair<std::string, uint64_t>> dtypes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};
  for (const auto& [name, size] : dtypes) {
    const std::string file =
        make_file(json{{"t", entry(name, {3}, 0, 3 * size)}}.dump(), std::string(3 * size, 0));
    const auto entries = parse(file);
    ASSERT_EQ(entries.size(), 1u) << name;
    EXPECT_EQ(entries[0].nbytes, 3 * size) << name;
    EXPECT_EQ(entries[0].dtype_name, name);
    EXPECT_EQ(entries[0].dtype.has_value(), name == "F32" || name == "BF16" || name == "F16") << name;
  }
}

TEST(safetensors_parse, EmptyHeaderWithNoDataIsValid) {
  EXPECT_TRUE(parse(make_file("{}")).empty());
  EXPECT_TRUE(parse(make_file(R"({"__metadata__": {"a": "b"}})")).empty());
}

TEST(safetensors_parse, ScalarsZeroSizeTensorsAndPaddingAreValid) {
  json h;
  h["scalar"] = entry("F32", json::array(), 0, 4);
  h["empty"] = entry("F16", {0, 7}, 4, 4);
  h["empty2"] = entry("F32", {0}, 4, 4);
  // A zero dimension makes the product 0 even after dimensions whose product overflows.
  h["huge_but_empty"] = entry("U8", {1ull << 62, 1ull << 62, 0}, 4, 4);
  const auto entries = parse(make_file(h.dump(), f32_bytes({1.0f}), /*align=*/true));
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[0].name, "scalar");
  EXPECT_TRUE(entries[0].shape.empty());
  EXPECT_EQ(entries[0].nbytes, 4u);
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ(entries[i].nbytes, 0u);
}

// ---------------------------------------------------------------------------------------
// Header length

TEST(safetensors_parse, RejectsFileShorterThanEightBytes) {
  expect_parse_error("", {"shorter than the 8-byte header length"});
  expect_parse_error(std::string(7, '\0'), {"7 bytes"});
}

TEST(safetensors_parse, RejectsHeaderLengthPastEndOfFile) {
  expect_parse_error(with_length(100, "{}"), {"header length 100", "past the end of the file"});
  expect_parse_error(with_length(3, "{}"), {"header length 3"});
}

TEST(safetensors_parse, RejectsHeaderLengthOverCap) {
  expect_parse_error(with_length(kMaxSafetensorsHeaderBytes + 1, "{}"), {"exceeds", "limit"});
  expect_parse_error(with_length(UINT64_MAX, "{}"), {"exceeds", "limit"});
  expect_parse_error(with_length(1ull << 63, "{}"), {"exceeds", "limit"});
}

TEST(safetensors_parse, RejectsHeaderLengthBelowTwo) {
  expect_parse_error(with_length(0, ""), {"header length 0"});
  expect_parse_error(with_length(1, "{"), {"header length 1"});
}

// ---------------------------------------------------------------------------------------
// JSON

TEST(safetensors_parse, RejectsInvalidJson) {
  expect_parse_error(make_file(R"({"a": )"), {"invalid JSON"});
  expect_parse_error(make_file(R"({"a": 1,})"), {"invalid JSON"});
  expect_parse_error(make_file("{} x"), {"invalid JSON"});
  expect_parse_error(make_file(std::string("{\"\xff\": 1}")), {"invalid JSON"});  // bad UTF-8
  expect_parse_error(make_file(std::string("{}\0\0", 4)), {"invalid JSON", "NUL byte at offset 2"});
}

TEST(safetensors_parse, RejectsJsonThatIsNotAnObject) {
  expect_parse_error(make_file("[]"), {"must be a JSON object", "array"});
  expect_parse_error(make_file(R"("str")"), {"must be a JSON object", "string"});
  expect_parse_error(make_file("12"), {"must be a JSON object"});
  expect_parse_error(make_file("null"), {"must be a JSON object"});
}

TEST(safetensors_parse, HeaderMustStartWithBrace) {
  expect_parse_error(make_file(" {}"), {"must begin with '{'"});
  expect_parse_error(make_file("\xEF\xBB\xBF{}"), {"must begin with '{'"});
  EXPECT_TRUE(parse(make_file("{}      ")).empty());  // trailing padding is fine
}

TEST(safetensors_parse, RejectsDeepNesting) {
  const std::string deep = std::string(1000, '[') + std::string(1000, ']');
  expect_parse_error(make_file(R"({"t": )" + deep + "}"), {"nested deeper"});
}

TEST(safetensors_parse, RejectsDuplicateTensorNames) {
  const std::string e = R"({"dtype": "U8", "shape": [1], "data_offsets": [0, 1]})";
  const std::string e2 = R"({"dtype": "U8", "shape": [1], "data_offsets": [1, 2]})";
  expect_parse_error(make_file(R"({"w": )" + e + R"(, "w": )" + e2 + "}", "ab"), {"duplicate key 'w'"});
}

TEST(safetensors_parse, RejectsDuplicateKeysInsideAnEntryOrMetadata) {
  expect_parse_error(
      make_file(R"({"w": {"dtype": "U8", "dtype": "U8", "shape": [1], "data_offsets": [0, 1]}})", "a"),
      {"duplicate key 'dtype'"});
  expect_parse_error(make_file(R"({"__metadata__": {"k": "a", "k": "b"}})"), {"duplicate key 'k'"});
  expect_parse_error(make_file(R"({"__metadata__": {}, "__metadata__": {}})"),
                     {"duplicate key '__metadata__'"});
}

// ---------------------------------------------------------------------------------------
// Entries

TEST(safetensors_parse, RejectsUnknownDtype) {
  expect_parse_error(make_file(json{{"w", entry("Q4_K", {1}, 0, 1)}}.dump(), "a"),
                     {"'w'", "unknown dtype 'Q4_K'"});
  expect_parse_error(make_file(json{{"w", entry("f32", {1}, 0, 4)}}.dump(), "abcd"),
                     {"'w'", "unknown dtype 'f32'"});
  expect_parse_error(make_file(R"({"w": {"dtype": 4, "shape": [1], "data_offsets": [0, 4]}})", "abcd"),
                     {"'w'", "dtype must be a string"});
}

TEST(safetensors_parse, RejectsMalformedEntries) {
  expect_parse_error(make_file(R"({"w": [1, 2]})"), {"'w'", "entry must be an object"});
  expect_parse_error(make_file(R"({"w": {"dtype": "U8", "shape": [1]}})", "a"),
                     {"'w'", "missing \"data_offsets\""});
  expect_parse_error(make_file(R"({"w": {"dtype": "U8", "data_offsets": [0, 1]}})", "a"),
                     {"'w'", "missing \"shape\""});
  expect_parse_error(make_file(R"({"w": {"shape": [1], "data_offsets": [0, 1]}})", "a"),
                     {"'w'", "missing \"dtype\""});
  json h = {{"w", entry("U8", {1}, 0, 1)}};
  h["w"]["extra"] = 1;
  expect_parse_error(make_file(h.dump(), "a"), {"'w'", "unknown key 'extra'"});
  expect_parse_error(make_file(R"({"w": {"dtype": "U8", "shape": 1, "data_offsets": [0, 1]}})", "a"),
                     {"'w'", "shape must be an array"});
}

TEST(safetensors_parse, RejectsBadShapeDimensions) {
  expect_parse_error(make_file(json{{"w", entry("U8", {-1}, 0, 0)}}.dump()),
                     {"'w'", "-1", "non-negative integer"});
  expect_parse_error(make_file(R"({"w": {"dtype": "U8", "shape": [1.0], "data_offsets": [0, 1]}})", "a"),
                     {"'w'", "non-negative integer"});
  expect_parse_error(make_file(R"({"w": {"dtype": "U8", "shape": [1e3], "data_offsets": [0, 1000]}})"),
                     {"'w'", "non-negative integer"});
  expect_parse_error(make_file(R"({"w": {"dtype": "U8", "shape": ["2"], "data_offsets": [0, 2]}})", "ab"),
                     {"'w'", "non-negative integer"});
  expect_parse_error(make_file(R"({"w": {"dtype": "U8", "shape": [true], "data_offsets": [0, 1]}})", "a"),
                     {"'w'", "non-negative integer"});
  // 2^63 does not fit the engine's int64 dimensions; 2^64 and beyond are not even u64.
  expect_parse_error(
      make_file(R"({"w": {"dtype": "U8", "shape": [9223372036854775808], "data_offsets": [0, 1]}})"),
      {"'w'", "too large"});
  expect_parse_error(
      make_file(R"({"w": {"dtype": "U8", "shape": [18446744073709551616], "data_offsets": [0, 1]}})"),
      {"'w'", "non-negative integer"});
}

TEST(safetensors_parse, RejectsShapeProductOverflow) {
  expect_parse_error(make_file(json{{"w", entry("U8", {1ull << 32, 1ull << 32}, 0, 0)}}.dump()),
                     {"'w'", "overflows 64 bits"});
  // The element count fits, the byte count does not.
  expect_parse_error(make_file(json{{"w", entry("F32", {1ull << 31, 1ull << 31}, 0, 0)}}.dump()),
                     {"'w'", "overflows 64 bits"});
}

TEST(safetensors_parse, RejectsBadDataOffsets) {
  expect_parse_error(make_file(json{{"w", entry("U8", {0}, 4, 3)}}.dump(), "abcd"),
                     {"'w'", "end before begin"});
  expect_parse_error(make_file(json{{"w", entry("U8", {4}, 0, 4)}}.dump(), "abc"),
                     {"'w'", "past the end of the data region"});
  expect_parse_error(make_file(json{{"w", entry("U8", {1}, UINT64_MAX - 1, UINT64_MAX)}}.dump(), "a"),
                     {"'w'", "past the end"});
  expect_parse_error(make_file(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0]}})", "a"),
                     {"'w'", "two integers"});
  expect_parse_error(make_file(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1, 2]}})", "a"),
                     {"'w'", "two integers"});
  expect_parse_error(make_file(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [-1, 0]}})", "a"),
                     {"'w'", "non-negative integers"});
  expect_parse_error(make_file(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1.0]}})", "a"),
                     {"'w'", "non-negative integers"});
  expect_parse_error(make_file(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": {"a": 0}}})", "a"),
                     {"'w'", "two integers"});
}

TEST(safetensors_parse, RejectsByteCountMismatch) {
  expect_parse_error(make_file(json{{"w", entry("F32", {2, 2}, 0, 12)}}.dump(), std::string(12, 0)),
                     {"'w'", "span 12 bytes", "needs 16"});
  expect_parse_error(make_file(json{{"w", entry("BF16", {3}, 0, 8)}}.dump(), std::string(8, 0)),
                     {"'w'", "span 8 bytes", "needs 6"});
}

// ---------------------------------------------------------------------------------------
// Tiling of the data region

TEST(safetensors_parse, RejectsGapBetweenTensors) {
  json h = {{"a", entry("U8", {2}, 0, 2)}, {"b", entry("U8", {2}, 3, 5)}};
  expect_parse_error(make_file(h.dump(), "abcde"), {"1 bytes before tensor 'b'", "gap"});
  json h2 = {{"a", entry("U8", {2}, 1, 3)}};
  expect_parse_error(make_file(h2.dump(), "abc"), {"before tensor 'a'", "gap"});
}

TEST(safetensors_parse, RejectsOverlappingTensors) {
  json h = {{"a", entry("U8", {3}, 0, 3)}, {"b", entry("U8", {3}, 2, 5)}};
  expect_parse_error(make_file(h.dump(), "abcde"), {"'b' overlaps tensor 'a'"});
  json same = {{"a", entry("U8", {3}, 0, 3)}, {"b", entry("U8", {3}, 0, 3)}};
  expect_parse_error(make_file(same.dump(), "abc"), {"overlaps"});
}

TEST(safetensors_parse, RejectsTrailingBytes) {
  expect_parse_error(make_file(json{{"a", entry("U8", {2}, 0, 2)}}.dump(), "abc"), {"1 trailing bytes"});
  expect_parse_error(make_file("{}", "x"), {"1 trailing bytes"});
}

// ---------------------------------------------------------------------------------------
// __metadata__

TEST(safetensors_parse, RejectsBadMetadata) {
  expect_parse_error(make_file(R"({"__metadata__": []})"), {"__metadata__ must be an object"});
  expect_parse_error(make_file(R"({"__metadata__": null})"), {"__metadata__ must be an object"});
  expect_parse_error(make_file(R"({"__metadata__": "pt"})"), {"__metadata__ must be an object"});
  expect_parse_error(make_file(R"({"__metadata__": {"format": 1}})"), {"__metadata__ value of 'format'"});
  expect_parse_error(make_file(R"({"__metadata__": {"format": {"a": "b"}}})"), {"must be a string"});
}

// ---------------------------------------------------------------------------------------
// MappedFile

TEST(safetensors_mapped_file, MapsContentsAndMoves) {
  TempDir dir;
  const fs::path p = dir.write("data.bin", "hello");
  MappedFile a(p);
  ASSERT_EQ(a.bytes().size(), 5u);
  EXPECT_EQ(std::memcmp(a.bytes().data(), "hello", 5), 0);
  EXPECT_EQ(a.path(), p);
  MappedFile b(std::move(a));
  EXPECT_EQ(b.bytes().size(), 5u);
  EXPECT_TRUE(a.bytes().empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
  MappedFile c(dir.write("other.bin", "xy"));
  c = std::move(b);
  EXPECT_EQ(c.bytes().size(), 5u);
  EXPECT_EQ(std::memcmp(c.bytes().data(), "hello", 5), 0);
}

TEST(safetensors_mapped_file, EmptyFileIsEmptySpan) {
  TempDir dir;
  MappedFile f(dir.write("empty.bin", ""));
  EXPECT_TRUE(f.bytes().empty());
}

TEST(safetensors_mapped_file, ErrorsNameThePath) {
  TempDir dir;
  const fs::path missing = dir.path() / "missing.bin";
  expect_error([&] { MappedFile f(missing); }, {missing.string(), "No such file or directory"});
  expect_error([&] { MappedFile f(dir.path()); }, {dir.path().string(), "not a regular file"});
}

// ---------------------------------------------------------------------------------------
// Archive

// A model file with f32, bf16 and f16 tensors, the f16 one at an odd offset.
std::string model_file() {
  json h;
  h["f32"] = entry("F32", {2, 3}, 0, 24);
  h["bf16"] = entry("BF16", {4}, 24, 32);
  h["odd"] = entry("U8", {1}, 32, 33);
  h["f16"] = entry("F16", {2, 2}, 33, 41);
  h["ids"] = entry("I64", {2}, 41, 57);
  const std::string data = f32_bytes({-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f}) +
                           bf16_bytes({1.5f, -2.0f, 0.25f, 3.0f}) + "z" +
                           f16_bytes({0.5f, -1.25f, 2.0f, 1024.0f}) + std::string(16, '\0');
  return make_file(h.dump(), data, /*align=*/true);
}

TEST(safetensors_archive, SingleFileRoundTrip) {
  TempDir dir;
  dir.write("model.safetensors", model_file());
  const SafetensorsArchive archive = SafetensorsArchive::open(dir.path());
  EXPECT_EQ(archive.names(), (std::vector<std::string>{"bf16", "f16", "f32", "ids", "odd"}));
  EXPECT_TRUE(archive.contains("f32"));
  EXPECT_FALSE(archive.contains("nope"));

  const Tensor f32 = archive.tensor("f32", {2, 3});
  EXPECT_EQ(f32.dtype, DType::F32);
  EXPECT_EQ(f32.rank, 2);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(load_as_f32_at(f32, i), -1.0f + 0.5f * static_cast<float>(i));

  const Tensor bf16 = archive.tensor("bf16", {4});
  EXPECT_EQ(bf16.dtype, DType::BF16);
  const std::vector<float> bf16_want = {1.5f, -2.0f, 0.25f, 3.0f};
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(load_as_f32_at(bf16, i), bf16_want[i]);

  // f16 data starts at an odd file offset: the view points at it as is.
  const Tensor f16 = archive.tensor("f16", {2, 2});
  EXPECT_EQ(f16.dtype, DType::F16);
  const std::optional<StoredTensor> stored = archive.find("f16");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->entry->offset % 2, 1u);
  EXPECT_EQ(f16.data, static_cast<const void*>(stored->data));
  EXPECT_EQ(*stored->file, dir.path() / "model.safetensors");
  const std::vector<float> f16_want = {0.5f, -1.25f, 2.0f, 1024.0f};
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(load_as_f32_at(f16, i), f16_want[i]);

  const auto bytes = archive.bytes_by_dtype();
  EXPECT_EQ(bytes.at("F32"), 24u);
  EXPECT_EQ(bytes.at("BF16"), 8u);
  EXPECT_EQ(bytes.at("F16"), 8u);
  EXPECT_EQ(bytes.at("U8"), 1u);
  EXPECT_EQ(bytes.at("I64"), 16u);
}

TEST(safetensors_archive, ArchiveOutlivesMove) {
  TempDir dir;
  dir.write("model.safetensors", model_file());
  SafetensorsArchive a = SafetensorsArchive::open(dir.path());
  const SafetensorsArchive b = std::move(a);
  EXPECT_EQ(load_as_f32_at(b.tensor("bf16", {4}), 3), 3.0f);
}

// Two shards and their index.
void write_sharded_model(const TempDir& dir) {
  json s1 = {{"a", entry("F32", {2}, 0, 8)}, {"b", entry("BF16", {1}, 8, 10)}};
  json s2 = {{"c", entry("F16", {3}, 0, 6)}};
  dir.write("model-00001-of-00002.safetensors",
            make_file(s1.dump(), f32_bytes({1.0f, 2.0f}) + bf16_bytes({-3.0f})));
  dir.write("model-00002-of-00002.safetensors", make_file(s2.dump(), f16_bytes({4.0f, 5.0f, 6.0f})));
  json index = {{"metadata", {{"total_size", 16}}},
                {"weight_map",
                 {{"a", "model-00001-of-00002.safetensors"},
                  {"b", "model-00001-of-00002.safetensors"},
                  {"c", "model-00002-of-00002.safetensors"}}}};
  dir.write("model.safetensors.index.json", index.dump(2));
}

TEST(safetensors_archive, ShardedArchiveViaIndex) {
  TempDir dir;
  write_sharded_model(dir);
  const SafetensorsArchive archive = SafetensorsArchive::open(dir.path());
  EXPECT_EQ(archive.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(load_as_f32_at(archive.tensor("a", {2}), 1), 2.0f);
  EXPECT_EQ(load_as_f32_at(archive.tensor("b", {1}), 0), -3.0f);
  EXPECT_EQ(load_as_f32_at(archive.tensor("c", {3}), 2), 6.0f);
  EXPECT_EQ(*archive.find("c")->file, dir.path() / "model-00002-of-00002.safetensors");
  EXPECT_EQ(archive.bytes_by_dtype().at("F16"), 6u);
}

TEST(safetensors_archive, IndexWinsOverASingleFile) {
  TempDir dir;
  write_sharded_model(dir);
  dir.write("model.safetensors", model_file());
  EXPECT_EQ(SafetensorsArchive::open(dir.path()).names(), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(safetensors_archive, RejectsMissingShardFile) {
  TempDir dir;
  write_sharded_model(dir);
  fs::remove(dir.path() / "model-00002-of-00002.safetensors");
  expect_error([&] { SafetensorsArchive::open(dir.path()); },
               {"model.safetensors.index.json", "model-00002-of-00002.safetensors", "missing"});
}

TEST(safetensors_archive, RejectsIndexedTensorAbsentFromShard) {
  TempDir dir;
  write_sharded_model(dir);
  json index = {{"weight_map",
                 {{"a", "model-00001-of-00002.safetensors"},
                  {"b", "model-00001-of-00002.safetensors"},
                  {"c", "model-00002-of-00002.safetensors"},
                  {"d", "model-00002-of-00002.safetensors"}}}};
  dir.write("model.safetensors.index.json", index.dump());
  expect_error([&] { SafetensorsArchive::open(dir.path()); },
               {"model.safetensors.index.json", "tensor 'd'", "model-00002-of-00002.safetensors"});
  // Listed against the wrong shard is the same error.
  index["weight_map"].erase("d");
  index["weight_map"]["c"] = "model-00001-of-00002.safetensors";
  dir.write("model.safetensors.index.json", index.dump());
  expect_error([&] { SafetensorsArchive::open(dir.path()); },
               {"tensor 'c'", "model-00001-of-00002.safetensors"});
}

TEST(safetensors_archive, RejectsShardPathsOutsideTheDirectory) {
  TempDir dir;
  write_sharded_model(dir);
  for (const std::string bad :
       {"../model-00001-of-00002.safetensors", "sub/x.safetensors", "/etc/passwd", "..", ""}) {
    json index = {{"weight_map", {{"a", bad}}}};
    dir.write("model.safetensors.index.json", index.dump());
    expect_error([&] { SafetensorsArchive::open(dir.path()); },
                 {"model.safetensors.index.json", "tensor 'a'", "not a plain file name"});
  }
}

TEST(safetensors_archive, RejectsDuplicateTensorAcrossShards) {
  TempDir dir;
  write_sharded_model(dir);
  json s2 = {{"a", entry("F16", {1}, 0, 2)}, {"c", entry("F16", {3}, 2, 8)}};
  dir.write("model-00002-of-00002.safetensors", make_file(s2.dump(), std::string(8, 0)));
  expect_error(
      [&] { SafetensorsArchive::open(dir.path()); },
      {"tensor 'a' is stored twice", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"});
}

TEST(safetensors_archive, RejectsBadIndexFile) {
  TempDir dir;
  write_sharded_model(dir);
  dir.write("model.safetensors.index.json", "{\"weight_map\": ");
  expect_error([&] { SafetensorsArchive::open(dir.path()); },
               {"model.safetensors.index.json", "invalid JSON"});
  dir.write("model.safetensors.index.json", R"({"metadata": {}})");
  expect_error([&] { SafetensorsArchive::open(dir.path()); }, {"model.safetensors.index.json", "weight_map"});
  dir.write("model.safetensors.index.json", R"({"weight_map": {}})");
  expect_error([&] { SafetensorsArchive::open(dir.path()); }, {"model.safetensors.index.json", "no tensors"});
  dir.write("model.safetensors.index.json", R"({"weight_map": {"a": 3}})");
  expect_error([&] { SafetensorsArchive::open(dir.path()); }, {"tensor 'a'", "file name string"});
  dir.write(
      "model.safetensors.index.json",
      R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "a": "model-00001-of-00002.safetensors"}})");
  expect_error([&] { SafetensorsArchive::open(dir.path()); }, {"duplicate key 'a'"});
}

TEST(safetensors_archive, CorruptShardErrorNamesTheFile) {
  TempDir dir;
  write_sharded_model(dir);
  dir.write("model-00002-of-00002.safetensors", with_length(1000, "{}"));
  expect_error([&] { SafetensorsArchive::open(dir.path()); },
               {(dir.path() / "model-00002-of-00002.safetensors").string(), "header length 1000"});
}

TEST(safetensors_archive, TensorRejectsWrongShape) {
  TempDir dir;
  dir.write("model.safetensors", model_file());
  const SafetensorsArchive archive = SafetensorsArchive::open(dir.path());
  const std::string file = (dir.path() / "model.safetensors").string();
  expect_error(
      [&] {
        archive.tensor("f32", {3, 2});
      },
      {"tensor 'f32'", file, "has shape [2, 3], expected [3, 2]"});
  expect_error([&] { archive.tensor("f32", {6}); }, {"tensor 'f32'", file, "expected [6]"});
}

TEST(safetensors_archive, TensorRejectsMissingName) {
  TempDir dir;
  dir.write("model.safetensors", model_file());
  const SafetensorsArchive archive = SafetensorsArchive::open(dir.path());
  expect_error([&] { archive.tensor("lm_head.weight", {2}); },
               {"tensor 'lm_head.weight' not found in", dir.path().string()});
}

TEST(safetensors_archive, TensorRejectsNonFloatDtype) {
  TempDir dir;
  dir.write("model.safetensors", model_file());
  const SafetensorsArchive archive = SafetensorsArchive::open(dir.path());
  expect_error([&] { archive.tensor("ids", {2}); },
               {"tensor 'ids'", (dir.path() / "model.safetensors").string(), "dtype I64"});
}

TEST(safetensors_archive, RejectsNonexistentOrNonDirectoryPaths) {
  TempDir dir;
  const fs::path missing = dir.path() / "no_such_model";
  expect_error([&] { SafetensorsArchive::open(missing); }, {missing.string(), "does not exist"});
  const fs::path file = dir.write("plain.txt", "x");
  expect_error([&] { SafetensorsArchive::open(file); }, {file.string(), "not a directory"});
  expect_error([&] { SafetensorsArchive::open(dir.path()); },
               {"no model.safetensors or model.safetensors.index.json in", dir.path().string()});
}

TEST(safetensors_archive, CorruptSingleFileErrorNamesTheFile) {
  TempDir dir;
  dir.write("model.safetensors", "short");
  expect_error([&] { SafetensorsArchive::open(dir.path()); },
               {(dir.path() / "model.safetensors").string(), "shorter than"});
}

}  // namespace
}  // namespace tokenmill
