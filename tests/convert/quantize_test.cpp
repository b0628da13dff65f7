// GGUF -> GGUF requantisation: per-tensor types (llama.cpp's mix, fallbacks, kept 1-D
// tensors), file types, copied metadata, and dequantized weights close to the originals.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "convert/quantize.h"
#include "formats/gguf.h"
#include "quant/quant_formats.h"
#include "quant/quant_reference.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace tokenmill {
namespace {

using testing::expect_error;

struct Weights {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// A one-layer model: matrices with rows of 256 (every block fits), 96 (32-blocks only)
// and 40 (no block fits), 1-D norms, and a tensor llama.cpp never quantizes.
std::map<std::string, Weights> model_weights() {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  std::map<std::string, Weights> w;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = normal(rng);
    w[name] = {std::move(shape), std::move(v)};
  };
  add("token_embd.weight", {256, 16});
  add("output.weight", {256, 16});
  add("output_norm.weight", {256});
  add("blk.0.attn_norm.weight", {256});
  add("blk.0.attn_q.weight", {256, 8});
  add("blk.0.attn_v.weight", {256, 8});
  add("blk.0.ffn_down.weight", {256, 8});
  add("blk.0.ffn_up.weight", {96, 8});
  add("blk.0.odd.weight", {40, 4});
  add("position_embd.weight", {256, 4});
  return w;
}

std::filesystem::path write_source(const testing::TempDir& dir, const std::map<std::string, Weights>& weights,
                                   bool with_odd = true) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u64("custom.big", ~uint64_t{0});
  w.set_u32("llama.block_count", 1);
  for (const auto& entry : weights) {
    const std::string& name = entry.first;
    const Weights* t = &entry.second;
    if (!with_odd && (name == "blk.0.ffn_up.weight" || name == "blk.0.odd.weight")) continue;
    w.add_tensor(name, t->shape, 0,
                 [t](std::span<std::byte> out) { std::memcpy(out.data(), t->values.data(), out.size()); });
  }
  const auto path = dir.path() / (with_odd ? "source.gguf" : "source_even.gguf");
  w.write(path);
  return path;
}

std::string type_of(const GgufFile& f, const std::string& name) {
  const uint32_t id = f.find_tensor(name)->type;
  return std::string(dtype_name(*quant::dtype_from_ggml_type(id)));
}

std::vector<float> dequantized(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo& t = *f.find_tensor(name);
  const DType d = *quant::dtype_from_ggml_type(t.type);
  const int64_t cols = t.shape[0];
  const size_t rows = t.nbytes / dtype_row_bytes(d, cols);
  std::vector<float> out(rows * static_cast<size_t>(cols));
  for (size_t r = 0; r < rows; ++r)
    quant::dequantize_row(d, f.tensor_data(t).data() + r * dtype_row_bytes(d, cols), out.data() + r * cols,
                          cols);
  return out;
}

// RMS error relative to the RMS of the original.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err += (a[i] - b[i]) * (a[i] - b[i]);
    ref += a[i] * a[i];
  }
  return std::sqrt(err / ref);
}

double tolerance(const std::string& type) {
  static const std::map<std::string, double> bounds = {
      {"f32", 0.0},   {"f16", 1e-3},  {"bf16", 5e-3}, {"q8_0", 0.01}, {"q6_k", 0.03}, {"q5_k", 0.05},
      {"q5_0", 0.06}, {"q5_1", 0.05}, {"q4_k", 0.1},  {"q4_0", 0.12}, {"q4_1", 0.1},  {"mxfp4", 0.2}};
  return bounds.at(type);
}

TEST(GgufQuantize, EveryTypeStaysCloseToTheOriginal) {
  const testing::TempDir dir;
  const auto weights = model_weights();
  const auto source = write_source(dir, weights);
  for (const char* name :
       {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k", "f16", "bf16", "f32"}) {
    SCOPED_TRACE(name);
    const auto out = dir.path() / (std::string(name) + ".gguf");
    std::vector<std::string> notes;
    const GgufWriteReport report = quantize_model(
        source, out,
        {.type = *parse_gguf_file_type(name), .log = [&](std::string_view l) { notes.emplace_back(l); }});
    EXPECT_EQ(report.tensors, weights.size());
    const GgufFile f = GgufFile::open(out);
    EXPECT_EQ(f.type_of("custom.big"), GgufType::U64);  // all metadata is copied
    for (const auto& [tensor, w] : weights) {
      const std::string type = type_of(f, tensor);
      if (w.shape.size() == 1) {
        EXPECT_EQ(type, "f32") << tensor;
      }
      EXPECT_LE(relative_error(w.values, dequantized(f, tensor)), tolerance(type)) << tensor << " " << type;
    }
    EXPECT_EQ(type_of(f, "position_embd.weight"), "f32");  // never quantized
    EXPECT_EQ(f.get_int("general.quantization_version"), 2);
    EXPECT_EQ(report.file_bytes, std::filesystem::file_size(out));
  }
}

// llama.cpp's choices for a one-layer model (use_more_bits(0, 1) holds, so attn_v and
// ffn_down get q6_k in q4_k), and its fallbacks for rows of 96 and 40.
TEST(GgufQuantize, TypesFollowLlamaCppMixAndFallbacks) {
  const testing::TempDir dir;
  const auto source = write_source(dir, model_weights());
  struct Case {
    const char* type;
    uint32_t file_type;
    std::map<std::string, std::string> types;  // tensor -> type; others: `type`
    size_t notes;
  };
  const std::vector<Case> cases = {
      {"q8_0", 7, {{"blk.0.odd.weight", "f16"}}, 1},
      {"q4_0", 2, {{"output.weight", "q6_k"}, {"blk.0.odd.weight", "f16"}}, 1},
      {"q4_k",
       15,
       {{"output.weight", "q6_k"},
        {"blk.0.attn_v.weight", "q6_k"},
        {"blk.0.ffn_down.weight", "q6_k"},
        {"blk.0.ffn_up.weight", "q5_0"},
        {"blk.0.odd.weight", "f16"}},
       2},
      {"q5_k",
       16,
       {{"output.weight", "q6_k"}, {"blk.0.ffn_up.weight", "q5_1"}, {"blk.0.odd.weight", "f16"}},
       2},
      {"q6_k", 18, {{"blk.0.ffn_up.weight", "q8_0"}, {"blk.0.odd.weight", "f16"}}, 2},
      {"f16", 1, {}, 0},
      {"bf16", 32, {}, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.type);
    const auto out = dir.path() / "out.gguf";
    std::vector<std::string> notes;
    const GgufWriteReport report = quantize_model(
        source, out,
        {.type = *parse_gguf_file_type(c.type), .log = [&](std::string_view l) { notes.emplace_back(l); }});
    const GgufFile f = GgufFile::open(out);
    EXPECT_EQ(f.get_int("general.file_type"), c.file_type);
    EXPECT_EQ(report.file_type, c.file_type);
    for (const char* t : {"token_embd.weight", "output.weight", "blk.0.attn_q.weight", "blk.0.attn_v.weight",
                          "blk.0.ffn_down.weight", "blk.0.ffn_up.weight", "blk.0.odd.weight"}) {
      const auto it = c.types.find(t);
      EXPECT_EQ(type_of(f, t), it == c.types.end() ? c.type : it->second) << t;
    }
    ASSERT_EQ(notes.size(), c.notes);
    if (!notes.empty()) {
      EXPECT_NE(notes.back().find("blk.0.odd.weight: row length 40"), std::string::npos);
    }
  }
}

// llama.cpp picks attn_v/ffn_down layers by layer number (use_more_bits), whatever the
// file order: here blk.10 comes before blk.2.
TEST(GgufQuantize, Q4KMixFollowsLayerNumbers) {
  const testing::TempDir dir;
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  std::vector<std::string> names;
  for (int l = 0; l < 16; ++l) names.push_back("blk." + std::to_string(l) + ".attn_v.weight");
  std::sort(names.begin(), names.end());
  const std::vector<float> zeros(256 * 2, 0.25f);
  for (const std::string& n : names)
    w.add_tensor(n, {256, 2}, 0,
                 [&](std::span<std::byte> out) { std::memcpy(out.data(), zeros.data(), out.size()); });
  w.write(dir.path() / "layers.gguf");
  quantize_model(dir.path() / "layers.gguf", dir.path() / "q.gguf", {.type = DType::Q4_K});
  const GgufFile f = GgufFile::open(dir.path() / "q.gguf");
  for (int l = 0; l < 16; ++l) {
    const bool more = l < 2 || l >= 14 || (l - 2) % 3 == 2;  // 0 1 4 7 10 13 14 15
    EXPECT_EQ(type_of(f, "blk." + std::to_string(l) + ".attn_v.weight"), more ? "q6_k" : "q4_k") << l;
  }
}

TEST(GgufQuantize, PureQ4KIsQ4KSmall) {
  const testing::TempDir dir;
  const auto source = write_source(dir, model_weights(), false);
  const auto out = dir.path() / "pure.gguf";
  EXPECT_EQ(quantize_model(source, out, {.type = DType::Q4_K, .pure = true}).file_type, 14u);
  const GgufFile f = GgufFile::open(out);
  for (const char* t : {"token_embd.weight", "output.weight", "blk.0.attn_v.weight", "blk.0.ffn_down.weight"})
    EXPECT_EQ(type_of(f, t), "q4_k") << t;
  EXPECT_EQ(quantize_model(source, out, {.type = DType::Q4_K}).file_type, 15u);
}

TEST(GgufQuantize, RequantizesQuantizedFilesAndCopiesUnchangedTensors) {
  const testing::TempDir dir;
  const auto weights = model_weights();
  const auto q8 = dir.path() / "q8.gguf";
  quantize_model(write_source(dir, weights), q8, {.type = DType::Q8_0});
  const auto again = dir.path() / "q8_again.gguf";
  quantize_model(q8, again, {.type = DType::Q8_0});
  const GgufFile a = GgufFile::open(q8), b = GgufFile::open(again);
  for (const GgufTensorInfo& t : a.tensors()) {
    const auto x = a.tensor_data(t), y = b.tensor_data(*b.find_tensor(t.name));
    EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin(), y.end())) << t.name;
  }
  const auto q4 = dir.path() / "q4.gguf";
  quantize_model(q8, q4, {.type = DType::Q4_0, .pure = true});
  const GgufFile c = GgufFile::open(q4);
  EXPECT_EQ(type_of(c, "blk.0.attn_q.weight"), "q4_0");
  EXPECT_LE(relative_error(weights.at("blk.0.attn_q.weight").values, dequantized(c, "blk.0.attn_q.weight")),
            0.13);
}

TEST(GgufQuantize, QuantizesAHuggingFaceDirectory) {
  const testing::TempDir dir;
  const auto out = dir.path() / "llama_q8_0.gguf";
  const auto hf = std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "hf" / "llama";
  const GgufWriteReport report = quantize_model(hf, out, {.type = DType::Q8_0});
  EXPECT_EQ(report.file_type, 7u);
  const GgufFile f = GgufFile::open(out);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(type_of(f, "blk.1.attn_q.weight"), "q8_0");
  EXPECT_EQ(type_of(f, "output.weight"), "q8_0");
  EXPECT_EQ(type_of(f, "rope_freqs.weight"), "f32");
  EXPECT_EQ(type_of(f, "blk.1.ffn_norm.weight"), "f32");
}

// llama.cpp's MXFP4_MOE: the experts MXFP4, every other matrix Q8_0 (the output too), the
// router f32; file type 38.
TEST(GgufQuantize, Mxfp4MoeMakesTheExpertsMxfp4) {
  const testing::TempDir dir;
  const auto out = dir.path() / "qwen3_moe_mxfp4.gguf";
  const auto hf = std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "hf" / "qwen3_moe";
  const GgufWriteReport report = quantize_model(hf, out, {.type = *parse_gguf_file_type("mxfp4_moe")});
  EXPECT_EQ(report.file_type, 38u);
  const GgufFile f = GgufFile::open(out);
  for (const char* experts :
       {"blk.0.ffn_gate_exps.weight", "blk.1.ffn_up_exps.weight", "blk.1.ffn_down_exps.weight"})
    EXPECT_EQ(type_of(f, experts), "mxfp4") << experts;
  EXPECT_EQ(type_of(f, "blk.1.attn_q.weight"), "q8_0");
  EXPECT_EQ(type_of(f, "output.weight"), "q8_0");
  EXPECT_EQ(type_of(f, "token_embd.weight"), "q8_0");
  EXPECT_EQ(type_of(f, "blk.1.ffn_gate_inp.weight"), "f32");
  const auto reference = dir.path() / "qwen3_moe_f32.gguf";
  quantize_model(hf, reference, {.type = DType::F32});
  EXPECT_LE(relative_error(dequantized(GgufFile::open(reference), "blk.1.ffn_up_exps.weight"),
                           dequantized(f, "blk.1.ffn_up_exps.weight")),
            tolerance("mxfp4"));
}

TEST(GgufQuantize, Errors) {
  const testing::TempDir dir;
  const auto source = write_source(dir, model_weights());
  expect_error([&] { quantize_model(source, source, {.type = DType::Q8_0}); }, {"overwrite the input"});
  expect_error([&] { quantize_model(source, dir.path() / "." / "source.gguf", {.type = DType::Q8_0}); },
               {"overwrite the input"});
  expect_error([&] { quantize_model(source, dir.path(), {.type = DType::Q8_0}); }, {"is a directory"});
  expect_error(
      [&] { quantize_model(dir.path() / "missing.gguf", dir.path() / "o.gguf", {.type = DType::Q8_0}); },
      {"missing.gguf", "no such file"});
  // A matrix in a type tokenmill cannot dequantize (IQ2_XXS: 66 bytes per 256 weights).
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.add_tensor("blk.0.attn_q.weight", {256, 2}, 16, {});
  w.write(dir.path() / "iq.gguf");
  expect_error([&] { quantize_model(dir.path() / "iq.gguf", dir.path() / "o.gguf", {.type = DType::Q4_0}); },
               {"blk.0.attn_q.weight", "IQ2_XXS", "cannot be read"});
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "o.gguf"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "o.gguf.tmp"));
  EXPECT_FALSE(parse_gguf_file_type("q3_k"));
  GgufWriter split;
  split.set_string("general.architecture", "llama");
  split.set_u16("split.count", 3);
  split.write(dir.path() / "part.gguf");
  expect_error(
      [&] { quantize_model(dir.path() / "part.gguf", dir.path() / "o.gguf", {.type = DType::Q4_0}); },
      {"part.gguf", "split GGUF"});
  expect_error([&] { quantize_model(source, dir.path() / "no" / "o.gguf", {.type = DType::Q4_0}); },
               {"the directory", "does not exist"});
}

}  // namespace
}  // namespace tokenmill
