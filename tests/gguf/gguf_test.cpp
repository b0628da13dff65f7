// Tests for the GGUF reader: well-formed files round-trip through every getter, the shared
// vocab-only files parse, and every kind of malformed input is a tokenmill::Error whose
// message names the file and what is wrong.
#include "formats/gguf.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf_builder.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace tokenmill {
namespace {

using testing::expect_error;

namespace fs = std::filesystem;
using testing::as_bytes;
using testing::GgufBuilder;
using testing::gstr;
using testing::le;
using testing::type_tag;
using testing::u32;
using testing::u64;

constexpr const char* kLabel = "test.gguf";

// ggml type ids used below.
constexpr uint32_t kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ8_0 = 8, kQ6_K = 14, kF64 = 28, kBF16 = 30, kMXFP4 = 39;

// GgufFile::parse does not copy its input: `file` must outlive the result (hence no
// overload for temporaries; see Parsed).
GgufFile parse(const std::string& file) { return GgufFile::parse(as_bytes(file), kLabel); }
GgufFile parse(const std::string&& file) = delete;

// A parsed file that owns its bytes.
struct Parsed {
  explicit Parsed(std::string b) : bytes(std::move(b)), file(parse(bytes)) {}
  std::string bytes;
  GgufFile file;
};

void expect_parse_error(const std::string& file, std::initializer_list<std::string> parts) {
  std::vector<std::string> all(parts);
  all.push_back(kLabel);
  expect_error([&] { parse(file); }, all);
}

// A file with one value of every type (arrays of every element type included) and a few
// tensors of plain and block-quantised types.
std::string every_type_file() {
  const std::string nested = type_tag(GgufType::ARRAY) + type_tag(GgufType::ARRAY) + u64(2) +
                             type_tag(GgufType::U8) + u64(3) + "\x01\x02\x03" + type_tag(GgufType::STRING) +
                             u64(1) + gstr("inner");
  return GgufBuilder()
      .kv_string("general.architecture", "llama")
      .kv<uint8_t>("v.u8", GgufType::U8, 200)
      .kv<int8_t>("v.i8", GgufType::I8, -100)
      .kv<uint16_t>("v.u16", GgufType::U16, 60000)
      .kv<int16_t>("v.i16", GgufType::I16, -30000)
      .kv<uint32_t>("v.u32", GgufType::U32, 4000000000u)
      .kv<int32_t>("v.i32", GgufType::I32, -2000000000)
      .kv<float>("v.f32", GgufType::F32, 0.25f)
      .kv<uint8_t>("v.bool", GgufType::BOOL, 1)
      .kv_string("v.string", std::string("with\0nul", 8))
      .kv_string("v.empty_string", "")
      .kv<uint64_t>("v.u64", GgufType::U64, 1ull << 62)
      .kv<int64_t>("v.i64", GgufType::I64, -(1ll << 62))
      .kv<double>("v.f64", GgufType::F64, -1.5e300)
      .kv_array<uint8_t>("a.u8", GgufType::U8, {0, 255})
      .kv_array<int8_t>("a.i8", GgufType::I8, {-128, 127})
      .kv_array<uint16_t>("a.u16", GgufType::U16, {1, 65535})
      .kv_array<int16_t>("a.i16", GgufType::I16, {-32768, 5})
      .kv_array<uint32_t>("a.u32", GgufType::U32, {7, 4294967295u})
      .kv_array<int32_t>("a.i32", GgufType::I32, {-1, 2})
      .kv_array<uint64_t>("a.u64", GgufType::U64, {3, uint64_t{INT64_MAX}})
      .kv_array<int64_t>("a.i64", GgufType::I64, {INT64_MIN, 9})
      .kv_array<float>("a.f32", GgufType::F32, {1.5f, -2.0f, 0.0f})
      .kv_array<double>("a.f64", GgufType::F64, {0.5, -3.25})
      .kv_array<uint8_t>("a.bool", GgufType::BOOL, {1, 0, 1})
      .kv_string_array("a.string", {"a", "", "long string value", std::string("\xff\x00z", 3)})
      .kv_array<uint32_t>("a.empty", GgufType::U32, {})
      .kv_raw("a.nested", nested)
      .tensor("token_embd.weight", {4, 2}, kF32, 32)
      .tensor("blk.0.attn_q.weight", {64, 3}, kQ4_0, 2 * 3 * 18)
      .tensor("blk.0.ffn_down.weight", {256, 2}, kQ6_K, 2 * 210)
      .tensor("empty", {0, 5}, kF16, 0)
      .tensor("scalar", {}, kF32, 4)
      .build();
}

TEST(gguf, EveryValueTypeRoundTrips) {
  const std::string bytes = every_type_file();
  const GgufFile f = parse(bytes);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.label(), kLabel);
  EXPECT_EQ(f.keys().size(), 28u);
  EXPECT_EQ(f.keys().front(), "general.architecture");
  EXPECT_EQ(f.keys().back(), "a.nested");

  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("v.u8"), 200);
  EXPECT_EQ(f.get_int("v.i8"), -100);
  EXPECT_EQ(f.get_int("v.u16"), 60000);
  EXPECT_EQ(f.get_int("v.i16"), -30000);
  EXPECT_EQ(f.get_int("v.u32"), 4000000000ll);
  EXPECT_EQ(f.get_int("v.i32"), -2000000000);
  EXPECT_EQ(f.get_int("v.u64"), 1ll << 62);
  EXPECT_EQ(f.get_int("v.i64"), -(1ll << 62));
  EXPECT_EQ(f.get_float("v.f32"), 0.25);
  EXPECT_EQ(f.get_float("v.f64"), -1.5e300);
  EXPECT_TRUE(f.get_bool("v.bool"));
  EXPECT_EQ(f.get_string("v.string"), std::string("with\0nul", 8));
  EXPECT_EQ(f.get_string("v.empty_string"), "");

  EXPECT_EQ(f.get_int_array("a.u8"), (std::vector<int64_t>{0, 255}));
  EXPECT_EQ(f.get_int_array("a.i8"), (std::vector<int64_t>{-128, 127}));
  EXPECT_EQ(f.get_int_array("a.u16"), (std::vector<int64_t>{1, 65535}));
  EXPECT_EQ(f.get_int_array("a.i16"), (std::vector<int64_t>{-32768, 5}));
  EXPECT_EQ(f.get_int_array("a.u32"), (std::vector<int64_t>{7, 4294967295ll}));
  EXPECT_EQ(f.get_int_array("a.i32"), (std::vector<int64_t>{-1, 2}));
  EXPECT_EQ(f.get_int_array("a.u64"), (std::vector<int64_t>{3, INT64_MAX}));
  EXPECT_EQ(f.get_int_array("a.i64"), (std::vector<int64_t>{INT64_MIN, 9}));
  EXPECT_EQ(f.get_int_array("a.empty"), std::vector<int64_t>{});
  EXPECT_EQ(f.get_float_array("a.f32"), (std::vector<float>{1.5f, -2.0f, 0.0f}));
  EXPECT_EQ(f.get_float_array("a.f64"), (std::vector<float>{0.5f, -3.25f}));
  EXPECT_EQ(f.get_string_array("a.string"),
            (std::vector<std::string>{"a", "", "long string value", std::string("\xff\x00z", 3)}));
  const std::vector<std::string_view> views = f.get_string_view_array("a.string");
  ASSERT_EQ(views.size(), 4u);
  EXPECT_EQ(views[2], "long string value");
  EXPECT_GE(views[2].data(), reinterpret_cast<const char*>(bytes.data()));  // a view into the input
  EXPECT_LT(views[2].data(), reinterpret_cast<const char*>(bytes.data()) + bytes.size());

  EXPECT_EQ(f.type_of("a.bool"), GgufType::ARRAY);
  EXPECT_EQ(f.array_type("a.bool"), GgufType::BOOL);
  EXPECT_EQ(f.array_size("a.bool"), 3u);
  EXPECT_EQ(f.type_of("a.nested"), GgufType::ARRAY);
  EXPECT_EQ(f.array_type("a.nested"), GgufType::ARRAY);
  EXPECT_EQ(f.array_size("a.nested"), 2u);
  EXPECT_EQ(f.type_of("v.u16"), GgufType::U16);
  EXPECT_EQ(f.type_of("v.f64"), GgufType::F64);
  EXPECT_EQ(f.type_of("v.string"), GgufType::STRING);

  EXPECT_TRUE(f.has("v.u8"));
  EXPECT_FALSE(f.has("v.u"));
  EXPECT_FALSE(f.has("v.u88"));
  EXPECT_EQ(f.find_int("v.i16"), -30000);
  EXPECT_EQ(f.find_int("missing"), std::nullopt);
  EXPECT_EQ(f.find_string("general.architecture"), "llama");
  EXPECT_EQ(f.find_string("missing"), std::nullopt);
  EXPECT_EQ(f.find_bool("v.bool"), true);
  EXPECT_EQ(f.find_bool("missing"), std::nullopt);
  EXPECT_EQ(f.find_float("v.f32"), 0.25);
  EXPECT_EQ(f.find_float("missing"), std::nullopt);

  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  ASSERT_EQ(f.tensors().size(), 5u);
  const GgufTensorInfo& embd = f.tensors()[0];
  EXPECT_EQ(embd.name, "token_embd.weight");
  EXPECT_EQ(embd.shape, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(embd.type, kF32);
  EXPECT_EQ(embd.offset, f.data_offset());
  EXPECT_EQ(embd.nbytes, 32u);
  const GgufTensorInfo& q = f.tensors()[1];
  EXPECT_EQ(q.type, kQ4_0);
  EXPECT_EQ(q.nbytes, 108u);
  EXPECT_EQ(q.offset, f.data_offset() + 32);
  EXPECT_EQ(f.tensors()[2].nbytes, 420u);
  EXPECT_EQ(f.tensors()[3].shape, (std::vector<int64_t>{0, 5}));
  EXPECT_EQ(f.tensors()[3].nbytes, 0u);
  EXPECT_TRUE(f.tensor_data(f.tensors()[3]).empty());
  EXPECT_EQ(f.tensors()[4].shape, std::vector<int64_t>{});
  EXPECT_EQ(f.tensors()[4].nbytes, 4u);

  const GgufTensorInfo* found = f.find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found, &f.tensors()[1]);
  EXPECT_EQ(f.find_tensor("blk.0.attn_q"), nullptr);
  const std::span<const std::byte> data = f.tensor_data(*found);
  ASSERT_EQ(data.size(), 108u);
  EXPECT_EQ(data.data(), as_bytes(bytes).data() + found->offset);
  // The builder fills tensor data with a pattern that depends on the data-region offset.
  EXPECT_EQ(std::to_integer<int>(data[0]), static_cast<unsigned char>(32 * 7 + 1));
  EXPECT_EQ(bytes.size(), f.tensors()[4].offset + 4);  // the scalar's bytes end the file
}

TEST(gguf, VersionTwoIsAccepted) {
  const Parsed p(GgufBuilder().version(2).kv_string("k", "v").build());
  const GgufFile& f = p.file;
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.get_string("k"), "v");
}

TEST(gguf, EmptyFileWithoutMetadataOrTensors) {
  const std::string bytes = GgufBuilder().pad_data_region(false).build();
  EXPECT_EQ(bytes.size(), 24u);
  const GgufFile f = parse(bytes);
  EXPECT_TRUE(f.keys().empty());
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.data_offset(), 32u);  // past the end: there is no tensor data
}

TEST(gguf, CustomAlignmentIsHonoured) {
  for (GgufType type : {GgufType::U32, GgufType::U64, GgufType::I32, GgufType::U8}) {
    GgufBuilder b;
    b.alignment(64);
    if (type == GgufType::U32) b.kv<uint32_t>("general.alignment", type, 64);
    if (type == GgufType::U64) b.kv<uint64_t>("general.alignment", type, 64);
    if (type == GgufType::I32) b.kv<int32_t>("general.alignment", type, 64);
    if (type == GgufType::U8) b.kv<uint8_t>("general.alignment", type, 64);
    const std::string bytes = b.tensor("a", {3}, kF32, 12).tensor("b", {16}, kBF16, 32).build();
    const GgufFile f = parse(bytes);
    EXPECT_EQ(f.alignment(), 64u);
    EXPECT_EQ(f.data_offset() % 64, 0u);
    EXPECT_EQ(f.tensors()[1].offset, f.data_offset() + 64);
  }
}

TEST(gguf, GapsBetweenTensorsAndAnyOrderAreAccepted) {
  // Two tensors stored in the reverse order of their infos, with a padding gap.
  const std::string bytes =
      GgufBuilder().tensor_info_raw("second", {8}, kF32, 64).tensor_info_raw("first", {2}, kF64, 0).build() +
      std::string(96, 'x');
  const GgufFile f = parse(bytes);
  EXPECT_EQ(f.find_tensor("first")->offset, f.data_offset());
  EXPECT_EQ(f.find_tensor("second")->offset, f.data_offset() + 64);
  EXPECT_EQ(f.find_tensor("second")->nbytes, 32u);
}

TEST(gguf, OpenMapsTheFileAndCopiesShareIt) {
  testing::TempDir dir;
  const fs::path path = dir.write("model.gguf", every_type_file());
  std::optional<GgufFile> copy;
  {
    const GgufFile f = GgufFile::open(path);
    EXPECT_EQ(f.label(), path.string());
    copy = f;
  }
  // The mapping outlives the original: the copy still reads metadata and tensor bytes.
  EXPECT_EQ(copy->get_string_array("a.string")[2], "long string value");
  EXPECT_EQ(copy->tensor_data(copy->tensors()[0]).size(), 32u);

  expect_error([&] { GgufFile::open(dir.path() / "missing.gguf"); }, {"missing.gguf"});
  const fs::path bad = dir.write("bad.gguf", std::string("GGUF\x01\x00\x00\x00", 8));
  expect_error([&] { GgufFile::open(bad); }, {bad.string(), "version 1"});
}

// --- getters on values of the wrong type ------------------------------------------------

TEST(gguf, GettersNameTheKeyAndTheFile) {
  const Parsed p(every_type_file());
  const GgufFile& f = p.file;
  expect_error([&] { f.get_string("no.such.key"); }, {kLabel, "'no.such.key'", "not found"});
  expect_error([&] { f.type_of("no.such.key"); }, {kLabel, "'no.such.key'", "not found"});
  expect_error([&] { f.get_int("v.string"); }, {kLabel, "'v.string'", "type string", "expected an integer"});
  expect_error([&] { f.get_int("v.f32"); }, {"'v.f32'", "type f32"});
  expect_error([&] { f.get_float("v.u32"); }, {"'v.u32'", "type u32", "expected f32 or f64"});
  expect_error([&] { f.get_bool("v.u8"); }, {"'v.u8'", "type u8", "expected bool"});
  expect_error([&] { f.get_string("v.u8"); }, {"'v.u8'", "expected string"});
  expect_error([&] { f.get_string("a.string"); }, {"'a.string'", "type array of string", "expected string"});
  expect_error([&] { f.get_string_array("a.u32"); }, {"'a.u32'", "array of u32", "expected array of string"});
  expect_error([&] { f.get_float_array("a.i32"); }, {"'a.i32'", "expected array of f32 or f64"});
  expect_error([&] { f.get_int_array("a.f32"); }, {"'a.f32'", "expected array of integers"});
  expect_error([&] { f.get_int_array("a.bool"); }, {"'a.bool'", "array of bool"});
  expect_error([&] { f.get_int_array("v.u32"); }, {"'v.u32'", "expected array of integers"});
  expect_error([&] { f.get_string_array("a.nested"); }, {"'a.nested'", "array of array"});
  expect_error([&] { f.array_type("v.u8"); }, {"'v.u8'", "expected array"});
  expect_error([&] { f.array_size("v.u8"); }, {"'v.u8'", "expected array"});
  // Optional getters are still strict about the type of a present key.
  expect_error([&] { f.find_int("v.string"); }, {"'v.string'"});
  expect_error([&] { f.find_string("v.u8"); }, {"'v.u8'"});
  expect_error([&] { f.find_bool("v.u8"); }, {"'v.u8'"});
  expect_error([&] { f.find_float("v.u8"); }, {"'v.u8'"});
}

TEST(gguf, U64AboveInt64MaxIsAnError) {
  const Parsed p(GgufBuilder()
                     .kv<uint64_t>("big", GgufType::U64, uint64_t{INT64_MAX} + 1)
                     .kv_array<uint64_t>("bigs", GgufType::U64, {1, UINT64_MAX})
                     .build());
  const GgufFile& f = p.file;
  expect_error([&] { f.get_int("big"); }, {kLabel, "'big'", "9223372036854775808", "int64"});
  expect_error([&] { f.get_int_array("bigs"); }, {kLabel, "'bigs'", "element 1", "int64"});
}

// --- the shared vocab-only files ---------------------------------------------------------

struct VocabCase {
  const char* file;
  const char* model;
  size_t tokens;
  size_t merges;  // 0: none
  bool scores;
};

TEST(gguf, SharedVocabFilesParse) {
  const fs::path dir = fs::path(TOKENMILL_SHARED_DATA_DIR) / "tokenizers";
  if (!fs::is_directory(dir)) GTEST_SKIP() << dir << " not found";
  const VocabCase cases[] = {
      {"ggml-vocab-gpt-2.gguf", "gpt2", 50257, 50000, false},
      {"ggml-vocab-llama-spm.gguf", "llama", 32000, 0, true},
      {"ggml-vocab-falcon.gguf", "gpt2", 65024, 64784, false},
      {"ggml-vocab-deepseek-llm.gguf", "gpt2", 102400, 99757, false},
  };
  for (const VocabCase& c : cases) {
    SCOPED_TRACE(c.file);
    const fs::path path = dir / c.file;
    const auto t0 = std::chrono::steady_clock::now();
    const GgufFile f = GgufFile::open(path);
    const auto t1 = std::chrono::steady_clock::now();
    const std::vector<std::string> tokens = f.get_string_array("tokenizer.ggml.tokens");
    const auto t2 = std::chrono::steady_clock::now();
    std::cout << c.file << ": open+parse " << std::chrono::duration<double, std::milli>(t1 - t0).count()
              << " ms, tokens materialised in " << std::chrono::duration<double, std::milli>(t2 - t1).count()
              << " ms\n";

    EXPECT_EQ(f.version(), 3u);
    EXPECT_TRUE(f.tensors().empty());
    EXPECT_EQ(f.get_string("tokenizer.ggml.model"), c.model);
    EXPECT_TRUE(f.find_string("tokenizer.ggml.pre").has_value());
    EXPECT_EQ(tokens.size(), c.tokens);
    EXPECT_EQ(f.array_size("tokenizer.ggml.tokens"), c.tokens);
    EXPECT_EQ(f.get_int_array("tokenizer.ggml.token_type").size(), c.tokens);
    if (c.merges > 0) {
      const std::vector<std::string> merges = f.get_string_array("tokenizer.ggml.merges");
      EXPECT_EQ(merges.size(), c.merges);
      EXPECT_NE(merges.front().find(' '), std::string::npos) << merges.front();
    } else {
      EXPECT_FALSE(f.has("tokenizer.ggml.merges"));
    }
    if (c.scores) {
      const std::vector<float> scores = f.get_float_array("tokenizer.ggml.scores");
      EXPECT_EQ(scores.size(), c.tokens);
      for (float s : scores) EXPECT_TRUE(std::isfinite(s));
    } else {
      EXPECT_FALSE(f.has("tokenizer.ggml.scores"));
    }
    const int64_t eos = f.get_int("tokenizer.ggml.eos_token_id");
    EXPECT_GE(eos, 0);
    EXPECT_LT(eos, static_cast<int64_t>(c.tokens));
    const std::string arch = f.get_string("general.architecture");
    if (const std::optional<int64_t> vocab = f.find_int(arch + ".vocab_size")) {
      EXPECT_EQ(*vocab, static_cast<int64_t>(c.tokens));
    }
    EXPECT_GT(f.get_int(arch + ".context_length"), 0);
  }
  const GgufFile spm = GgufFile::open(dir / "ggml-vocab-llama-spm.gguf");
  const std::vector<std::string> tokens = spm.get_string_array("tokenizer.ggml.tokens");
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[2], "</s>");
  EXPECT_EQ(spm.get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_TRUE(spm.get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_FALSE(spm.get_bool("tokenizer.ggml.add_eos_token"));
  const GgufFile gpt2 = GgufFile::open(dir / "ggml-vocab-gpt-2.gguf");
  EXPECT_EQ(gpt2.get_string_array("tokenizer.ggml.merges")[0], "\xc4\xa0 t");
  EXPECT_EQ(gpt2.get_string_array("tokenizer.ggml.tokens")[0], "!");
}

// A synthetic 150k-token vocabulary (tokens, scores, token types, 150k merges) parses
// without materialising anything, and fast.
TEST(gguf, LargeVocabularyParsesFast) {
  constexpr size_t kTokens = 150000;
  std::vector<std::string> tokens, merges;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (size_t i = 0; i < kTokens; ++i) {
    tokens.push_back(fmt::format("tok{}", i));  // (not "tok" + to_string: g++-12 -Wrestrict false positive)
    merges.push_back(fmt::format("m{} x", i));
    scores.push_back(-static_cast<float>(i));
    types.push_back(1);
  }
  const std::string bytes = GgufBuilder()
                                .kv_string("tokenizer.ggml.model", "gpt2")
                                .kv_string_array("tokenizer.ggml.tokens", tokens)
                                .kv_array<float>("tokenizer.ggml.scores", GgufType::F32, scores)
                                .kv_array<int32_t>("tokenizer.ggml.token_type", GgufType::I32, types)
                                .kv_string_array("tokenizer.ggml.merges", merges)
                                .build();
  const auto t0 = std::chrono::steady_clock::now();
  const GgufFile f = parse(bytes);
  const auto t1 = std::chrono::steady_clock::now();
  const std::vector<std::string> got = f.get_string_array("tokenizer.ggml.tokens");
  const auto t2 = std::chrono::steady_clock::now();
  const std::vector<std::string_view> got_merges = f.get_string_view_array("tokenizer.ggml.merges");
  const auto t3 = std::chrono::steady_clock::now();
  const double parse_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  std::cout << "150k vocab (" << bytes.size() << " bytes): parse " << parse_ms << " ms, tokens as strings "
            << std::chrono::duration<double, std::milli>(t2 - t1).count() << " ms, merges as views "
            << std::chrono::duration<double, std::milli>(t3 - t2).count() << " ms\n";
  EXPECT_EQ(got, tokens);
  ASSERT_EQ(got_merges.size(), kTokens);
  EXPECT_EQ(got_merges[149999], "m149999 x");
  EXPECT_EQ(f.get_float_array("tokenizer.ggml.scores"), scores);
  EXPECT_LT(parse_ms, 1000.0);  // a loose bound that holds under sanitizers too; ~1 ms in release
}

// --- malformed input ---------------------------------------------------------------------

TEST(gguf, BadMagicAndVersion) {
  expect_parse_error("", {"not a GGUF file", "0 bytes"});
  expect_parse_error("GGU", {"not a GGUF file"});
  expect_parse_error("GGML" + u32(3) + u64(0) + u64(0), {"not a GGUF file", "47 47 4d 4c"});
  expect_parse_error("GGUF" + u32(1) + u32(0) + u32(0), {"version 1 is not supported"});
  expect_parse_error("GGUF" + u32(4) + u64(0) + u64(0), {"unsupported GGUF version 4"});
  expect_parse_error("GGUF" + u32(0) + u64(0) + u64(0), {"unsupported GGUF version 0"});
  expect_parse_error("GGUF" + u32(0x03000000) + u64(0) + u64(0), {"big-endian"});
  expect_parse_error("GGUF" + u32(3) + u64(0), {"header", "metadata count", "past the end"});
  expect_parse_error("GGUF\x03", {"header", "version", "past the end"});
}

TEST(gguf, LyingCountsAreRefusedBeforeAnyAllocation) {
  expect_parse_error(GgufBuilder().kv_count(1ull << 40).build(), {"1099511627776 metadata entries"});
  expect_parse_error(GgufBuilder().kv_count(UINT64_MAX).build(), {"metadata entries"});
  expect_parse_error(GgufBuilder().tensor_count(UINT64_MAX).build(), {"tensors"});
  expect_parse_error(GgufBuilder().tensor_count(3).build(), {"3 tensors", "at most 0"});
  // Each count fits on its own, but not both together.
  const std::string both = GgufBuilder().kv_count(2).tensor_count(1).build() + std::string(40, '\0');
  expect_parse_error(both, {"2 metadata entries and 1 tensors", "at least 50 bytes"});
  // A count that fits the minimum size but not the real entries runs out of bytes.
  expect_parse_error(GgufBuilder().kv_string("a", "b").kv_count(2).build() + std::string(13, '\0'),
                     {"metadata entry #1", "empty key"});
}

TEST(gguf, KeysAreBounded) {
  expect_parse_error(
      GgufBuilder().raw_kv_bytes(u64(100) + "short").kv_count(1).build() + std::string(8, '\0'),
      {"metadata entry #0", "key", "past the end"});
  expect_parse_error(GgufBuilder().kv_string(std::string(65536, 'k'), "v").build(),
                     {"metadata entry #0", "key length 65536 exceeds the 65535 byte limit"});
  expect_parse_error(GgufBuilder().raw_kv_bytes(u64(UINT64_MAX) + std::string(16, 'x')).build(),
                     {"key length 18446744073709551615 exceeds"});
  expect_parse_error(GgufBuilder().kv_string("", "v").build(), {"metadata entry #0", "empty key"});
  EXPECT_NO_THROW(Parsed(GgufBuilder().kv_string(std::string(65535, 'k'), "v").build()));
}

TEST(gguf, UnknownValueTypes) {
  expect_parse_error(GgufBuilder().kv_raw("k", u32(13) + u64(0)).build(),
                     {"key 'k'", "unknown value type 13"});
  expect_parse_error(GgufBuilder().kv_raw("k", u32(0xffffffff) + u64(0)).build(),
                     {"unknown value type 4294967295"});
  expect_parse_error(GgufBuilder().kv_raw("k", type_tag(GgufType::ARRAY) + u32(42) + u64(0)).build(),
                     {"key 'k'", "unknown array element type 42"});
}

TEST(gguf, StringValuesAreBounded) {
  expect_parse_error(GgufBuilder().kv_raw("k", type_tag(GgufType::STRING) + u64(1000) + "abc").build(),
                     {"key 'k'", "string (1000 bytes", "past the end"});
  expect_parse_error(GgufBuilder().kv_raw("k", type_tag(GgufType::STRING) + u64((256ull << 20) + 1)).build(),
                     {"key 'k'", "string length 268435457 exceeds the 268435456 byte limit"});
  expect_parse_error(
      GgufBuilder().kv_raw("k", type_tag(GgufType::STRING) + "\x01\x02").pad_data_region(false).build(),
      {"key 'k'", "string length", "past the end"});
}

TEST(gguf, TruncatedScalars) {
  // The value runs into the end of the file (no padding after it).
  expect_parse_error(
      GgufBuilder().kv_raw("k", type_tag(GgufType::U32) + "\x01\x02").pad_data_region(false).build(),
      {"key 'k'", "u32 (4 bytes", "past the end"});
  expect_parse_error(GgufBuilder().kv_raw("k", type_tag(GgufType::F64)).pad_data_region(false).build(),
                     {"key 'k'", "f64", "past the end"});
  expect_parse_error(GgufBuilder().kv_raw("k", type_tag(GgufType::U8)).pad_data_region(false).build(),
                     {"key 'k'", "past the end"});
}

TEST(gguf, BoolsMustBeZeroOrOne) {
  expect_parse_error(GgufBuilder().kv<uint8_t>("flag", GgufType::BOOL, 2).build(),
                     {"key 'flag'", "bool value 2", "neither 0 nor 1"});
  expect_parse_error(GgufBuilder().kv_array<uint8_t>("flags", GgufType::BOOL, {0, 1, 255}).build(),
                     {"key 'flags', element 2", "bool value 255"});
}

TEST(gguf, ArrayCountsAreBoundedByTheBytesLeft) {
  expect_parse_error(GgufBuilder()
                         .kv_raw("k", type_tag(GgufType::ARRAY) + type_tag(GgufType::U32) + u64(1ull << 61))
                         .build(),
                     {"key 'k'", "array of 2305843009213693952 u32 elements", "4 bytes per element"});
  expect_parse_error(
      GgufBuilder()
          .kv_raw("k", type_tag(GgufType::ARRAY) + type_tag(GgufType::STRING) + u64(UINT64_MAX))
          .build(),
      {"key 'k'", "string elements", "8 bytes per element"});
  expect_parse_error(
      GgufBuilder().kv_raw("k", type_tag(GgufType::ARRAY) + type_tag(GgufType::ARRAY) + u64(1000)).build(),
      {"key 'k'", "array elements", "12 bytes per element"});
  // Enough bytes for the minimum, but a string element runs past the end.
  expect_parse_error(GgufBuilder()
                         .kv_raw("k", type_tag(GgufType::ARRAY) + type_tag(GgufType::STRING) + u64(2) +
                                          gstr("ok") + u64(5000))
                         .build(),
                     {"key 'k', element 1", "string (5000 bytes", "past the end"});
  expect_parse_error(GgufBuilder()
                         .kv_raw("k", type_tag(GgufType::ARRAY) + type_tag(GgufType::STRING) + u64(1) +
                                          u64(1ull << 40) + std::string(8, 'x'))
                         .build(),
                     {"key 'k', element 0", "string length 1099511627776 exceeds"});
}

TEST(gguf, NestedArraysOneLevelOnly) {
  const std::string inner_arrays = type_tag(GgufType::ARRAY) + type_tag(GgufType::ARRAY) + u64(1) +
                                   type_tag(GgufType::ARRAY) + u64(1) + type_tag(GgufType::U8) + u64(1) +
                                   "\x01";
  expect_parse_error(GgufBuilder().kv_raw("deep", inner_arrays).build() + std::string(32, '\0'),
                     {"key 'deep', element 0", "nested more than one level"});
  // Elements of a nested array are validated like any other.
  const std::string bad_bool = type_tag(GgufType::ARRAY) + type_tag(GgufType::ARRAY) + u64(1) +
                               type_tag(GgufType::BOOL) + u64(2) + "\x01\x07";
  expect_parse_error(GgufBuilder().kv_raw("nb", bad_bool).build(),
                     {"key 'nb', element 0[1]", "bool value 7"});
  const std::string bad_type = type_tag(GgufType::ARRAY) + type_tag(GgufType::ARRAY) + u64(1) + u32(77) +
                               u64(0) + std::string(8, '\0');
  expect_parse_error(GgufBuilder().kv_raw("nt", bad_type).build(),
                     {"key 'nt', element 0", "unknown array element type 77"});
}

TEST(gguf, DuplicateKeys) {
  expect_parse_error(
      GgufBuilder().kv_string("a", "1").kv<uint32_t>("b", GgufType::U32, 2).kv_string("a", "3").build(),
      {"duplicate metadata key 'a'", "entries #0 and #2"});
}

TEST(gguf, AlignmentMustBeAnIntegerPowerOfTwo) {
  expect_parse_error(GgufBuilder().kv_string("general.alignment", "32").build(),
                     {"general.alignment has type string, expected an integer"});
  expect_parse_error(GgufBuilder().kv<float>("general.alignment", GgufType::F32, 32.0f).build(),
                     {"general.alignment has type f32"});
  expect_parse_error(GgufBuilder().kv<uint32_t>("general.alignment", GgufType::U32, 0).build(),
                     {"general.alignment 0 is not a power of two"});
  expect_parse_error(GgufBuilder().kv<uint32_t>("general.alignment", GgufType::U32, 48).build(),
                     {"general.alignment 48 is not a power of two"});
  expect_parse_error(GgufBuilder().kv<int32_t>("general.alignment", GgufType::I32, -32).build(),
                     {"general.alignment -32 is not a power of two"});
  expect_parse_error(GgufBuilder().kv<uint64_t>("general.alignment", GgufType::U64, UINT64_MAX).build(),
                     {"general.alignment", "does not fit in int64"});
  // A huge power of two is fine as long as no tensor needs to be placed with it.
  EXPECT_NO_THROW(Parsed(GgufBuilder().kv<uint64_t>("general.alignment", GgufType::U64, 1ull << 62).build()));
}

TEST(gguf, TensorInfoShapes) {
  expect_parse_error(GgufBuilder().tensor_info_raw("t", {1, 1, 1, 1, 1}, kF32, 0).build(),
                     {"tensor 't'", "5 dimensions; at most 4"});
  expect_parse_error(
      GgufBuilder().raw_tensor_bytes(gstr("t") + u32(UINT32_MAX)).build() + std::string(32, '\0'),
      {"tensor 't'", "4294967295 dimensions"});
  expect_parse_error(GgufBuilder().tensor_info_raw("t", {4, -2}, kF32, 0).build(),
                     {"tensor 't'", "dimension 1 is negative (-2)"});
  expect_parse_error(
      GgufBuilder().tensor_info_raw("t", {int64_t{1} << 32, int64_t{1} << 32}, kF32, 0).build(),
      {"tensor 't'", "shape", "overflows"});
  expect_parse_error(GgufBuilder().tensor_info_raw("t", {int64_t{1} << 62, 2}, kF32, 0).build(),
                     {"tensor 't'", "9223372036854775808 elements, more than 2^63 - 1"});
  expect_parse_error(GgufBuilder().tensor_info_raw("t", {int64_t{1} << 61, 2}, kF64, 0).build(),
                     {"tensor 't'", "byte size", "overflows"});
  // A zero dimension makes the product 0 even after huge ones.
  const Parsed z(GgufBuilder().tensor_info_raw("z", {INT64_MAX, INT64_MAX, 0}, kF32, 0).build());
  EXPECT_EQ(z.file.tensors()[0].nbytes, 0u);
  expect_parse_error(GgufBuilder()
                         .raw_tensor_bytes(gstr("t") + u32(4) + le<int64_t>(4) + le<int64_t>(4))
                         .pad_data_region(false)
                         .build(),
                     {"tensor 't'", "dimension", "past the end"});
}

TEST(gguf, TensorTypesAndBlocks) {
  for (uint32_t removed : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 99u, UINT32_MAX}) {
    expect_parse_error(GgufBuilder().tensor_info_raw("t", {32}, removed, 0).build(),
                       {"tensor 't'", "unknown or unsupported ggml type " + std::to_string(removed)});
  }
  expect_parse_error(GgufBuilder().tensor_info_raw("q", {33, 2}, kQ4_0, 0).build(),
                     {"tensor 'q'", "ne[0] = 33 is not a multiple of the Q4_0 block size 32"});
  expect_parse_error(GgufBuilder().tensor_info_raw("k", {128}, kQ6_K, 0).build(),
                     {"tensor 'k'", "Q6_K block size 256"});
  expect_parse_error(GgufBuilder().tensor_info_raw("e", {2896, 4}, kMXFP4, 0).build(),
                     {"tensor 'e'", "ne[0] = 2896 is not a multiple of the MXFP4 block size 32"});
  expect_parse_error(GgufBuilder().tensor_info_raw("s", {}, kQ8_0, 0).build(), {"tensor 's'", "ne[0] = 1"});
}

TEST(gguf, TensorNames) {
  expect_parse_error(GgufBuilder().tensor("a", {1}, kF32, 4).tensor("a", {1}, kF32, 4).build(),
                     {"duplicate tensor name 'a'", "#0 and #1"});
  expect_parse_error(GgufBuilder().tensor_info_raw("", {1}, kF32, 0).build() + std::string(32, '\0'),
                     {"tensor info #0", "empty tensor name"});
  expect_parse_error(GgufBuilder().tensor_info_raw(std::string(65536, 'n'), {1}, kF32, 0).build(),
                     {"tensor info #0", "tensor name length 65536 exceeds"});
  // Unprintable bytes in names are escaped in messages.
  expect_parse_error(GgufBuilder().tensor_info_raw("bad\x01name", {-1}, kF32, 0).build(),
                     {"tensor 'bad\\x01name'"});
}

TEST(gguf, TensorDataPlacement) {
  expect_parse_error(GgufBuilder().tensor_info_raw("t", {4}, kF32, 16).build() + std::string(64, '\0'),
                     {"tensor 't'", "data offset 16 is not a multiple of the alignment 32"});
  expect_parse_error(GgufBuilder().tensor_info_raw("t", {64}, kF32, 0).build() + std::string(100, '\0'),
                     {"tensor 't'", "runs past the end of the file"});
  expect_parse_error(GgufBuilder().tensor("a", {4}, kF32, 16).tensor_info_raw("b", {4}, kF32, 64).build(),
                     {"tensor 'b'", "runs past the end"});
  expect_parse_error(GgufBuilder().tensor_info_raw("t", {4}, kF32, UINT64_MAX - 31).build(),
                     {"tensor 't'", "overflows"});
  expect_parse_error(
      GgufBuilder().tensor_info_raw("a", {16}, kF32, 0).tensor_info_raw("b", {8}, kF32, 32).build() +
          std::string(64, '\0'),
      {"tensor 'b'", "overlaps tensor 'a'"});
  expect_parse_error(
      GgufBuilder().tensor_info_raw("a", {8}, kF32, 0).tensor_info_raw("b", {8}, kF32, 0).build() +
          std::string(64, '\0'),
      {"overlaps"});
  // A zero-byte tensor occupies nothing: it may share an offset, even past the end.
  const Parsed p(GgufBuilder()
                     .tensor("a", {8}, kF32, 32)
                     .tensor_info_raw("e", {0}, kF32, 0)
                     .tensor_info_raw("far", {0}, kF32, 1 << 20)
                     .build());
  const GgufFile& f = p.file;
  EXPECT_TRUE(f.tensor_data(*f.find_tensor("far")).empty());
  EXPECT_EQ(f.tensor_data(*f.find_tensor("a")).size(), 32u);
  // A tensor info that does not belong to the file is refused, not read.
  GgufTensorInfo stranger = *f.find_tensor("a");
  stranger.offset = 1ull << 40;
  expect_error([&] { f.tensor_data(stranger); }, {"is not a tensor of this file"});
}

// Every proper prefix of a valid file is refused cleanly; every single-byte corruption
// either parses or is refused, and whatever parses describes bytes inside the input.
TEST(gguf, TruncationAndCorruptionNeverCrash) {
  const std::string valid = every_type_file();
  ASSERT_NO_THROW(parse(valid));
  for (size_t n = 0; n < valid.size(); ++n) {
    const std::string prefix = valid.substr(0, n);
    bool refused = false;
    try {
      parse(prefix);
    } catch (const Error& e) {
      refused = true;
      EXPECT_NE(std::string(e.what()).find(kLabel), std::string::npos) << e.what();
    }
    // Only the trailing tensor data can be cut without the parser noticing... and it notices.
    EXPECT_TRUE(refused) << "prefix of " << n << " bytes";
  }
  std::mt19937_64 rng(7);
  size_t accepted = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    std::string mutated = valid;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) {
      const size_t at = rng() % mutated.size();
      mutated[at] = static_cast<char>(rng() % 4 == 0 ? 0xff : rng());
    }
    try {
      const GgufFile f = parse(mutated);
      ++accepted;
      for (const GgufTensorInfo& t : f.tensors()) {
        if (t.nbytes > 0) {
          EXPECT_LE(t.offset + t.nbytes, mutated.size());
        }
        (void)f.tensor_data(t);
      }
      for (const std::string& key : f.keys()) {
        try {
          (void)f.get_int(key);
        } catch (const Error&) {
        }
        try {
          (void)f.get_string_array(key);
        } catch (const Error&) {
        }
      }
    } catch (const Error&) {
    }
  }
  EXPECT_GT(accepted, 0u);  // some corruptions land in values and keep the file valid
}

}  // namespace
}  // namespace tokenmill
