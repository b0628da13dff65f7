// GgufWriter: every value type and tensor layout read back through GgufFile, byte-exact
// metadata copies, the checks a reader would make, and atomic writes.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/error.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "gguf/gguf_builder.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace tokenmill {
namespace {

using testing::expect_error;

GgufFile parse(const std::string& bytes) { return GgufFile::parse(testing::as_bytes(bytes), "written"); }

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Fills a tensor with bytes that depend on the tensor and the position.
GgufWriter::FillFn pattern(uint8_t seed) {
  return [seed](std::span<std::byte> out) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>(seed + i * 13);
  };
}

TEST(GgufWriter, EveryScalarTypeRoundTrips) {
  GgufWriter w;
  w.set_u8("u8", 200);
  w.set_i8("i8", -100);
  w.set_u16("u16", 60000);
  w.set_i16("i16", -30000);
  w.set_u32("u32", 4000000000u);
  w.set_i32("i32", -2000000000);
  w.set_u64("u64", uint64_t{1} << 60);
  w.set_i64("i64", -(int64_t{1} << 60));
  w.set_f32("f32", 1.5f);
  w.set_f64("f64", 3.0000000000000004);
  w.set_bool("bool", true);
  w.set_string("string", "h\xC3\xA9llo");
  w.set_string("empty", "");
  const std::string bytes = w.to_bytes();
  const GgufFile f = parse(bytes);
  EXPECT_EQ(f.version(), 3u);
  const std::vector<std::pair<const char*, GgufType>> types = {
      {"u8", GgufType::U8},   {"i8", GgufType::I8},   {"u16", GgufType::U16},   {"i16", GgufType::I16},
      {"u32", GgufType::U32}, {"i32", GgufType::I32}, {"u64", GgufType::U64},   {"i64", GgufType::I64},
      {"f32", GgufType::F32}, {"f64", GgufType::F64}, {"bool", GgufType::BOOL}, {"string", GgufType::STRING}};
  for (const auto& [key, type] : types) EXPECT_EQ(f.type_of(key), type) << key;
  EXPECT_EQ(f.get_int("u8"), 200);
  EXPECT_EQ(f.get_int("i8"), -100);
  EXPECT_EQ(f.get_int("u16"), 60000);
  EXPECT_EQ(f.get_int("i16"), -30000);
  EXPECT_EQ(f.get_int("u32"), 4000000000);
  EXPECT_EQ(f.get_int("i32"), -2000000000);
  EXPECT_EQ(f.get_int("u64"), int64_t{1} << 60);
  EXPECT_EQ(f.get_int("i64"), -(int64_t{1} << 60));
  EXPECT_EQ(f.get_float("f32"), 1.5);
  EXPECT_EQ(f.get_float("f64"), 3.0000000000000004);
  EXPECT_TRUE(f.get_bool("bool"));
  EXPECT_EQ(f.get_string("string"), "h\xC3\xA9llo");
  EXPECT_EQ(f.get_string("empty"), "");
  EXPECT_EQ(f.keys(), w.keys());
  EXPECT_EQ(bytes.size() % 32, 0u);
}

TEST(GgufWriter, ArraysRoundTrip) {
  GgufWriter w;
  const std::vector<uint8_t> u8 = {0, 7, 255};
  const std::vector<int8_t> i8 = {-128, 0, 127};
  const std::vector<uint16_t> u16 = {1, 65535};
  const std::vector<int16_t> i16 = {-32768, 32767};
  const std::vector<uint32_t> u32 = {0, 4000000000u};
  const std::vector<int32_t> i32 = {-5, 1, 3};
  const std::vector<uint64_t> u64 = {uint64_t{1} << 62};
  const std::vector<int64_t> i64 = {-(int64_t{1} << 62), 9};
  const std::vector<float> f32 = {0.5f, -2.25f};
  const std::vector<double> f64 = {0.1, 1e300};
  const std::vector<std::string> strings = {"a", "", "Ġthe", std::string(70000, 'x')};
  w.set_array("u8", std::span<const uint8_t>(u8));
  w.set_array("i8", std::span<const int8_t>(i8));
  w.set_array("u16", std::span<const uint16_t>(u16));
  w.set_array("i16", std::span<const int16_t>(i16));
  w.set_array("u32", std::span<const uint32_t>(u32));
  w.set_array("i32", std::span<const int32_t>(i32));
  w.set_array("u64", std::span<const uint64_t>(u64));
  w.set_array("i64", std::span<const int64_t>(i64));
  w.set_array("f32", std::span<const float>(f32));
  w.set_array("f64", std::span<const double>(f64));
  w.set_array("none", std::span<const int32_t>());
  w.set_bool_array("bools", {true, false, true});
  w.set_string_array("strings", std::span<const std::string>(strings));
  const std::string bytes = w.to_bytes();
  const GgufFile f = parse(bytes);
  auto ints = [&](const char* key) { return f.get_int_array(key); };
  EXPECT_EQ(f.array_type("u8"), GgufType::U8);
  EXPECT_EQ(ints("u8"), (std::vector<int64_t>{0, 7, 255}));
  EXPECT_EQ(ints("i8"), (std::vector<int64_t>{-128, 0, 127}));
  EXPECT_EQ(ints("u16"), (std::vector<int64_t>{1, 65535}));
  EXPECT_EQ(ints("i16"), (std::vector<int64_t>{-32768, 32767}));
  EXPECT_EQ(ints("u32"), (std::vector<int64_t>{0, 4000000000}));
  EXPECT_EQ(ints("i32"), (std::vector<int64_t>{-5, 1, 3}));
  EXPECT_EQ(ints("u64"), (std::vector<int64_t>{int64_t{1} << 62}));
  EXPECT_EQ(ints("i64"), (std::vector<int64_t>{-(int64_t{1} << 62), 9}));
  EXPECT_EQ(f.array_type("f64"), GgufType::F64);
  EXPECT_EQ(f.get_float_array("f32"), f32);
  EXPECT_EQ(f.get_float_array("f64"), (std::vector<float>{0.1f, static_cast<float>(1e300)}));
  EXPECT_EQ(f.array_type("none"), GgufType::I32);
  EXPECT_EQ(f.array_size("none"), 0u);
  EXPECT_EQ(f.array_type("bools"), GgufType::BOOL);
  EXPECT_EQ(f.array_size("bools"), 3u);
  EXPECT_EQ(f.get_string_array("strings"), strings);
}

TEST(GgufWriter, SettingAKeyAgainReplacesItInPlace) {
  GgufWriter w;
  w.set_string("a", "first");
  w.set_u32("b", 1);
  w.set_u64("a", 7);
  EXPECT_EQ(w.keys(), (std::vector<std::string>{"a", "b"}));
  const std::string bytes = w.to_bytes();
  const GgufFile f = parse(bytes);
  EXPECT_EQ(f.type_of("a"), GgufType::U64);
  EXPECT_EQ(f.get_int("a"), 7);
  EXPECT_TRUE(w.remove("a"));
  EXPECT_FALSE(w.remove("a"));
  EXPECT_FALSE(w.has("a"));
  EXPECT_TRUE(w.has("b"));
}

TEST(GgufWriter, TensorsOfSeveralTypesLandAligned) {
  for (const uint32_t alignment : {32u, 64u, 256u}) {
    GgufWriter w;
    if (alignment != 32) w.set_u32("general.alignment", alignment);
    w.set_string("general.architecture", "llama");
    struct Case {
      const char* name;
      std::vector<int64_t> shape;
      DType type;
      uint64_t nbytes;
    };
    const std::vector<Case> cases = {
        {"f32", {3, 2}, DType::F32, 24},      {"f16", {5}, DType::F16, 10},
        {"bf16", {5, 3}, DType::BF16, 30},    {"q8_0", {64, 2}, DType::Q8_0, 4 * 34},
        {"q4_k", {256, 1}, DType::Q4_K, 144}, {"q6_k.3d", {256, 2, 3}, DType::Q6_K, 6 * 210},
        {"empty", {0, 4}, DType::F32, 0},
    };
    const uint32_t ids[] = {0, 1, 30, 8, 12, 14, 0};
    for (size_t i = 0; i < cases.size(); ++i)
      EXPECT_EQ(w.add_tensor(cases[i].name, cases[i].shape, ids[i], pattern(static_cast<uint8_t>(i))),
                cases[i].nbytes);
    const std::string bytes = w.to_bytes();
    const GgufFile f = parse(bytes);
    EXPECT_EQ(f.alignment(), alignment);
    EXPECT_EQ(f.data_offset() % alignment, 0u);
    ASSERT_EQ(f.tensors().size(), cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      const GgufTensorInfo& t = f.tensors()[i];
      EXPECT_EQ(t.name, cases[i].name);
      EXPECT_EQ(t.shape, cases[i].shape);
      EXPECT_EQ(t.type, ids[i]);
      EXPECT_EQ(t.nbytes, cases[i].nbytes);
      EXPECT_EQ((t.offset - f.data_offset()) % alignment, 0u) << t.name;
      std::vector<std::byte> expected(cases[i].nbytes);
      pattern(static_cast<uint8_t>(i))(expected);
      const auto data = f.tensor_data(t);
      EXPECT_TRUE(std::equal(data.begin(), data.end(), expected.begin(), expected.end())) << t.name;
    }
  }
}

TEST(GgufWriter, RefusesWhatAReaderWouldRefuse) {
  GgufWriter w;
  expect_error([&] { w.set_u32("general.alignment", 48); }, {"general.alignment", "power of two"});
  expect_error([&] { w.set_u64("general.alignment", 64); }, {"general.alignment", "u32"});
  expect_error([&] { w.set_u8("", 1); }, {"key"});
  expect_error([&] { w.set_u8(std::string(70000, 'k'), 1); }, {"1..65535"});
  expect_error([&] { w.add_tensor(std::string(64, 'n'), {32}, 0, {}); }, {"1..63"});
  expect_error([&] { w.add_tensor("q", {48, 2}, 8, {}); }, {"\"q\"", "ne[0] = 48", "block size 32"});
  expect_error([&] { w.add_tensor("d", {1, 1, 1, 1, 1}, 0, {}); }, {"5 dimensions"});
  expect_error([&] { w.add_tensor("n", {-1}, 0, {}); }, {"negative"});
  expect_error([&] { w.add_tensor("t", {4}, 999, {}); }, {"unknown ggml type 999"});
  expect_error([&] { w.add_tensor("big", {int64_t{1} << 40, int64_t{1} << 40}, 0, {}); }, {"overflow"});
  w.add_tensor("x", {4}, 0, {});
  expect_error([&] { w.add_tensor("x", {4}, 0, {}); }, {"\"x\"", "twice"});
}

// A metadata section with every value type, nested arrays and a u64 above INT64_MAX,
// written by the test builder: the writer's copy is byte-identical.
TEST(GgufWriter, CopyMetadataIsByteExact) {
  using namespace testing;
  std::string nested = type_tag(GgufType::ARRAY) + type_tag(GgufType::ARRAY) + u64(2);
  nested += type_tag(GgufType::U16) + u64(2) + le<uint16_t>(1) + le<uint16_t>(2);
  nested += type_tag(GgufType::STRING) + u64(1) + gstr("deep");
  GgufBuilder b;
  b.kv_string("general.architecture", "llama")
      .kv("general.alignment", GgufType::U32, uint32_t{64})
      .kv("big", GgufType::U64, ~uint64_t{0})
      .kv("f64", GgufType::F64, 2.5)
      .kv("flag", GgufType::BOOL, uint8_t{1})
      .kv_array("f64s", GgufType::F64, std::vector<double>{0.1, 0.2})
      .kv_string_array("tokens", {"a", "b c", ""})
      .kv_raw("nested", nested)
      .alignment(64);
  const std::string original = b.build();
  const GgufFile f = parse(original);
  GgufWriter w;
  w.set_string("general.architecture", "replaced");
  w.copy_metadata(f);
  EXPECT_EQ(w.alignment(), 64u);
  EXPECT_EQ(w.to_bytes(), original);
}

TEST(GgufWriter, WritesAtomically) {
  const testing::TempDir dir;
  const auto path = dir.path() / "model.gguf";
  const auto tmp = dir.path() / "model.gguf.tmp";
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.add_tensor("a", {8}, 0, pattern(1));
  const uint64_t size = w.write(path);
  EXPECT_EQ(size, std::filesystem::file_size(path));
  EXPECT_EQ(read_file(path), w.to_bytes());
  EXPECT_FALSE(std::filesystem::exists(tmp));

  // A failure while producing data leaves the previous file as it was and no temporary.
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "previous model";
  GgufWriter failing = w;
  failing.add_tensor("b", {1024}, 0, [](std::span<std::byte>) { throw Error("tensor b: cannot read"); });
  expect_error([&] { failing.write(path); }, {"tensor b: cannot read"});
  EXPECT_EQ(read_file(path), "previous model");
  EXPECT_FALSE(std::filesystem::exists(tmp));

  expect_error([&] { w.write(dir.path() / "missing" / "x.gguf"); }, {"missing/x.gguf.tmp", "cannot create"});
}

}  // namespace
}  // namespace tokenmill
