// Hugging Face directory -> GGUF: llama.cpp's names, shapes and metadata, the llama q/k
// permutation, GPT-2's transposes, and tokenizer metadata that tokenizes as the original.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "convert/hf_to_gguf.h"
#include "core/json_file.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "model/model.h"
#include "model/transformer.h"
#include "quant/quant_formats.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_json.h"

namespace tokenmill {
namespace {

using testing::expect_error;

const std::filesystem::path kHf = std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "hf";
const std::filesystem::path kTokenizers = std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "tokenizers";

// Converts fixture `name` and opens the result.
GgufFile convert(const testing::TempDir& dir, const std::string& name, DType type) {
  const auto out = dir.path() / (name + ".gguf");
  convert_hf_to_gguf(kHf / name, out, {.type = type});
  return GgufFile::open(out);
}

// Tensor `name` of `f` as floats (f32 or f16 storage).
std::vector<float> floats(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo* t = f.find_tensor(name);
  if (t == nullptr) ADD_FAILURE() << "no tensor " << name;
  if (t == nullptr) return {};
  const DType d = t->type == 0 ? DType::F32 : t->type == 1 ? DType::F16 : DType::BF16;
  std::vector<float> out(t->nbytes / dtype_size(d));
  for (size_t i = 0; i < out.size(); ++i) out[i] = load_as_f32(f.tensor_data(*t).data(), d, i);
  return out;
}

std::vector<float> hf_floats(const std::string& model, const std::string& name) {
  const auto archive = SafetensorsArchive::open(kHf / model);
  const StoredTensor s = *archive.find(name);
  std::vector<float> out(s.entry->nbytes / dtype_size(*s.entry->dtype));
  for (size_t i = 0; i < out.size(); ++i) out[i] = load_as_f32(s.data, *s.entry->dtype, i);
  return out;
}

// Undoes convert_hf_to_gguf.py's permute: row 2i + j of a head came from row j * half + i.
std::vector<float> unpermute(const std::vector<float>& w, int64_t heads, int64_t cols) {
  const auto rows = static_cast<int64_t>(w.size()) / cols;
  const int64_t head_rows = rows / heads;
  std::vector<float> out(w.size());
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t h = r / head_rows, within = r % head_rows;
    const int64_t hf_row = h * head_rows + (within % 2) * (head_rows / 2) + within / 2;
    std::copy_n(w.begin() + r * cols, cols, out.begin() + hf_row * cols);
  }
  return out;
}

TEST(GgufConvert, LlamaMetadataNamesAndShapes) {
  const testing::TempDir dir;
  const GgufFile f = convert(dir, "llama", DType::F32);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_string("general.name"), "llama");
  EXPECT_EQ(f.get_int("general.file_type"), 0);
  EXPECT_EQ(f.get_int("llama.context_length"), 128);
  EXPECT_EQ(f.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f.get_int("llama.feed_forward_length"), 128);
  EXPECT_EQ(f.get_int("llama.block_count"), 2);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), 4);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 2);
  EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("llama.attention.layer_norm_rms_epsilon")), 1e-6f);
  EXPECT_EQ(f.get_float("llama.rope.freq_base"), 500000.0);
  EXPECT_EQ(f.get_int("llama.rope.dimension_count"), 16);
  EXPECT_EQ(f.get_int("llama.vocab_size"), 256);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "none");  // the fixture has no tokenizer.json
  EXPECT_EQ(f.type_of("llama.block_count"), GgufType::U32);
  EXPECT_EQ(f.type_of("llama.rope.freq_base"), GgufType::F32);

  std::set<std::string> names;
  for (const GgufTensorInfo& t : f.tensors()) names.insert(t.name);
  std::set<std::string> expected = {"token_embd.weight", "output_norm.weight", "output.weight",
                                    "rope_freqs.weight"};
  for (int l = 0; l < 2; ++l)
    for (const char* n : {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate",
                          "ffn_up", "ffn_down"})
      expected.insert(fmt::format("blk.{}.{}.weight", l, n));
  EXPECT_EQ(names, expected);
  EXPECT_EQ(f.find_tensor("token_embd.weight")->shape, (std::vector<int64_t>{64, 256}));
  EXPECT_EQ(f.find_tensor("blk.0.attn_k.weight")->shape, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(f.find_tensor("blk.1.ffn_down.weight")->shape, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(f.find_tensor("blk.0.attn_norm.weight")->shape, (std::vector<int64_t>{64}));

  // Llama 3 rope scaling (factor 8, original context 64, theta 5e5, head_dim 16) as factors.
  const std::vector<float> factors = floats(f, "rope_freqs.weight");
  ASSERT_EQ(factors.size(), 8u);
  EXPECT_EQ(factors[0], 1.0f);
  EXPECT_NEAR(factors[1], 2.44226, 1e-4);
  EXPECT_EQ(factors[7], 8.0f);
}

TEST(GgufConvert, LlamaQueryAndKeyArePermutedPerHead) {
  const testing::TempDir dir;
  const GgufFile f = convert(dir, "llama", DType::F32);
  for (int l = 0; l < 2; ++l) {
    const std::string hf = fmt::format("model.layers.{}.", l), g = fmt::format("blk.{}.", l);
    const auto q = floats(f, g + "attn_q.weight"), hq = hf_floats("llama", hf + "self_attn.q_proj.weight");
    EXPECT_NE(q, hq);
    EXPECT_EQ(unpermute(q, 4, 64), hq);
    EXPECT_EQ(unpermute(floats(f, g + "attn_k.weight"), 2, 64),
              hf_floats("llama", hf + "self_attn.k_proj.weight"));
    EXPECT_EQ(floats(f, g + "attn_v.weight"), hf_floats("llama", hf + "self_attn.v_proj.weight"));
    EXPECT_EQ(floats(f, g + "ffn_gate.weight"), hf_floats("llama", hf + "mlp.gate_proj.weight"));
  }
  EXPECT_EQ(floats(f, "output.weight"), hf_floats("llama", "lm_head.weight"));
}

TEST(GgufConvert, Qwen2KeepsRowOrderAndBiasesAndTiesOutput) {
  const testing::TempDir dir;
  const GgufFile f = convert(dir, "qwen2", DType::F16);
  EXPECT_EQ(f.get_string("general.architecture"), "qwen2");
  EXPECT_EQ(f.get_int("general.file_type"), 1);
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);  // tied
  EXPECT_EQ(f.find_tensor("rope_freqs.weight"), nullptr);
  EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight")->type, 1u);
  EXPECT_EQ(f.find_tensor("blk.0.attn_q.bias")->type, 0u);
  EXPECT_EQ(floats(f, "blk.0.attn_q.weight"), hf_floats("qwen2", "model.layers.0.self_attn.q_proj.weight"));
  EXPECT_EQ(floats(f, "blk.1.attn_k.bias"), hf_floats("qwen2", "model.layers.1.self_attn.k_proj.bias"));
  EXPECT_EQ(floats(f, "blk.1.attn_v.bias"), hf_floats("qwen2", "model.layers.1.self_attn.v_proj.bias"));
}

// The last rows of `theirs` equal the last rows of `ours` (rows of `vocab`) to 1e-4 of the
// largest logit.
void expect_last_rows_close(const std::vector<float>& ours, size_t vocab, const nlohmann::json& theirs_json,
                            const std::string& what) {
  const auto theirs = theirs_json.get<std::vector<std::vector<float>>>();
  const size_t first = ours.size() / vocab - theirs.size();
  float largest = 0, worst = 0;
  for (size_t t = 0; t < theirs.size(); ++t)
    for (size_t v = 0; v < vocab; ++v) {
      largest = std::max(largest, std::abs(theirs[t][v]));
      worst = std::max(worst, std::abs(ours[(first + t) * vocab + v] - theirs[t][v]));
    }
  EXPECT_LE(worst, 1e-4f * largest) << what;
}

// The GGUF file converted from fixture `name` (f32) computes transformers' logits of the
// fixture's prompts (in a run of the fixture's context, where it names one), and of its long
// prompt where it has one, to 1e-4 of the largest logit.
void expect_transformers_logits(const testing::TempDir& dir, const std::string& name) {
  const auto model = Model::load(dir.path() / (name + ".gguf"));
  const auto backend = make_cpu_backend();
  const auto expected = read_json_file(kHf / name / "expected.json");
  Transformer transformer(*model, *backend, expected.value("context", int64_t{0}),
                          Transformer::kDefaultChunkTokens, DType::F32);
  const auto vocab = static_cast<size_t>(model->config.vocab_size);
  const auto logits_of = [&](Transformer& t, const nlohmann::json& prompt) {
    const auto ids = prompt.get<std::vector<int32_t>>();
    std::vector<float> logits(ids.size() * vocab);
    t.forward_all(ids, logits);
    t.reset();
    return logits;
  };
  for (size_t p = 0; p < expected["prompts"].size(); ++p)
    expect_last_rows_close(logits_of(transformer, expected["prompts"][p]), vocab, expected["logits"][p],
                           name + " prompt " + std::to_string(p));
  if (expected.contains("long_prompt")) {
    Transformer whole_context(*model, *backend, 0, Transformer::kDefaultChunkTokens, DType::F32);
    expect_last_rows_close(logits_of(whole_context, expected["long_prompt"]), vocab, expected["long_logits"],
                           name + " long prompt");
  }
}

// Qwen3: llama.cpp's "qwen3" (NEOX rope, rows as in HF) with its per-head q/k norms.
TEST(GgufConvert, Qwen3KeepsItsQueryAndKeyNormsAndComputesTransformersLogits) {
  const testing::TempDir dir;
  const GgufFile f = convert(dir, "qwen3", DType::F32);
  EXPECT_EQ(f.get_string("general.architecture"), "qwen3");
  EXPECT_EQ(f.get_int("qwen3.attention.key_length"), 32);
  EXPECT_EQ(f.find_tensor("blk.1.attn_k_norm.weight")->shape, (std::vector<int64_t>{32}));
  EXPECT_EQ(floats(f, "blk.1.attn_q_norm.weight"),
            hf_floats("qwen3", "model.layers.1.self_attn.q_norm.weight"));
  EXPECT_EQ(floats(f, "blk.0.attn_q.weight"), hf_floats("qwen3", "model.layers.0.self_attn.q_proj.weight"));
  expect_transformers_logits(dir, "qwen3");
}

// Phi-3: llama.cpp's "phi3" keeps both fused projections (qkv as attn_qkv, gate|up as ffn_up).
TEST(GgufConvert, Phi3KeepsItsFusedProjectionsAndComputesTransformersLogits) {
  const testing::TempDir dir;
  const GgufFile f = convert(dir, "phi3", DType::F32);
  EXPECT_EQ(f.get_string("general.architecture"), "phi3");
  EXPECT_EQ(f.find_tensor("blk.0.attn_qkv.weight")->shape, (std::vector<int64_t>{64, 64 + 2 * 32}));
  EXPECT_EQ(f.find_tensor("blk.0.ffn_up.weight")->shape, (std::vector<int64_t>{64, 2 * 128}));
  EXPECT_EQ(floats(f, "blk.1.ffn_up.weight"), hf_floats("phi3", "model.layers.1.mlp.gate_up_proj.weight"));
  EXPECT_EQ(f.find_tensor("blk.0.ffn_gate.weight"), nullptr);
  expect_transformers_logits(dir, "phi3");
}

// Phi-4-mini: RoPE over 12 of 16 elements, LongRoPE's factors as tensors, as llama.cpp's converter
// writes them.
TEST(GgufConvert, Phi4MiniKeepsItsLongRopeAndPartialRotation) {
  const testing::TempDir dir;
  const GgufFile f = convert(dir, "phi4_mini", DType::F32);
  EXPECT_EQ(f.get_int("phi3.rope.dimension_count"), 12);
  EXPECT_EQ(f.get_int("phi3.rope.scaling.original_context_length"), 256);
  EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("phi3.rope.scaling.attn_factor")),
                  static_cast<float>(std::sqrt(1.0 + std::log(2.0) / std::log(256.0))));
  const auto config = read_json_file(kHf / "phi4_mini" / "config.json").at("rope_parameters");
  EXPECT_EQ(floats(f, "rope_factors_long.weight"), config.at("long_factor").get<std::vector<float>>());
  EXPECT_EQ(floats(f, "rope_factors_short.weight"), config.at("short_factor").get<std::vector<float>>());
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);  // tied embeddings
  expect_transformers_logits(dir, "phi4_mini");
}

// OLMo 2: llama.cpp's "olmo2" with norms after attention and MLP and whole-projection q/k norms.
TEST(GgufConvert, Olmo2KeepsItsPostNormsAndComputesTransformersLogits) {
  const testing::TempDir dir;
  const GgufFile f = convert(dir, "olmo2", DType::F32);
  EXPECT_EQ(f.get_string("general.architecture"), "olmo2");
  EXPECT_EQ(f.find_tensor("blk.0.attn_q_norm.weight")->shape, (std::vector<int64_t>{64}));
  EXPECT_EQ(f.find_tensor("blk.0.attn_k_norm.weight")->shape, (std::vector<int64_t>{32}));
  EXPECT_EQ(floats(f, "blk.1.post_ffw_norm.weight"),
            hf_floats("olmo2", "model.layers.1.post_feedforward_layernorm.weight"));
  EXPECT_NE(f.find_tensor("blk.1.post_attention_norm.weight"), nullptr);
  EXPECT_EQ(f.find_tensor("blk.0.attn_norm.weight"), nullptr);
  expect_transformers_logits(dir, "olmo2");
}

// Mixtral: a "llama" file with llama.expert_count; each layer's experts stacked into
// ffn_{gate,up,down}_exps (ne = [cols, rows, experts]), the router as ffn_gate_inp.
TEST(GgufConvert, MixtralStacksItsExpertsAndComputesTransformersLogits) {
  const testing::TempDir dir;
  const GgufFile f = convert(dir, "mixtral", DType::F32);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("llama.expert_count"), 4);
  EXPECT_EQ(f.get_int("llama.expert_used_count"), 2);
  EXPECT_EQ(f.find_tensor("blk.0.ffn_gate_inp.weight")->shape, (std::vector<int64_t>{64, 4}));
  EXPECT_EQ(f.find_tensor("blk.0.ffn_gate_exps.weight")->shape, (std::vector<int64_t>{64, 128, 4}));
  EXPECT_EQ(f.find_tensor("blk.0.ffn_down_exps.weight")->shape, (std::vector<int64_t>{128, 64, 4}));
  EXPECT_EQ(f.find_tensor("blk.0.ffn_gate.weight"), nullptr);
  const std::vector<float> down = floats(f, "blk.1.ffn_down_exps.weight");
  const std::vector<float> expert2 =
      hf_floats("mixtral", "model.layers.1.block_sparse_moe.experts.2.w2.weight");
  ASSERT_EQ(down.size(), 4 * expert2.size());
  EXPECT_TRUE(
      std::equal(expert2.begin(), expert2.end(), down.begin() + 2 * static_cast<int64_t>(expert2.size())));
  expect_transformers_logits(dir, "mixtral");
}

// Qwen3-MoE: llama.cpp's "qwen3moe", the experts' own width as expert_feed_forward_length.
// Quantized, every expert matrix is quantized row by row like any other matrix.
TEST(GgufConvert, Qwen3MoeConvertsAndQuantizes) {
  const testing::TempDir dir;
  const GgufFile f = convert(dir, "qwen3_moe", DType::F32);
  EXPECT_EQ(f.get_string("general.architecture"), "qwen3moe");
  EXPECT_EQ(f.get_int("qwen3moe.expert_count"), 8);
  EXPECT_EQ(f.get_int("qwen3moe.expert_used_count"), 3);
  EXPECT_EQ(f.get_int("qwen3moe.expert_feed_forward_length"), 32);
  EXPECT_EQ(f.get_int("qwen3moe.feed_forward_length"), 128);
  EXPECT_EQ(f.find_tensor("blk.1.ffn_up_exps.weight")->shape, (std::vector<int64_t>{64, 32, 8}));
  expect_transformers_logits(dir, "qwen3_moe");
  const auto q8 = dir.path() / "qwen3_moe_q8_0.gguf";
  convert_hf_to_gguf(kHf / "qwen3_moe", q8, {.type = DType::Q8_0});
  const GgufFile quantized = GgufFile::open(q8);
  EXPECT_EQ(quantized.find_tensor("blk.0.ffn_down_exps.weight")->type, quant::ggml_type_of(DType::Q8_0));
  // The router (stored bf16) is not quantized, and written f32 as llama.cpp's converter does.
  EXPECT_EQ(quantized.find_tensor("blk.0.ffn_gate_inp.weight")->type, quant::ggml_type_of(DType::F32));
  const auto model = Model::load(q8);
  EXPECT_EQ(model->weights.layers[1].expert_up.dtype, DType::Q8_0);
}

// Gemma 3: llama.cpp's "gemma3", its norm weights w written as the 1 + w they multiply by,
// post-norms under llama.cpp's names, the window in attention.sliding_window (the rest
// llama.cpp derives); the converted file computes transformers' logits.
TEST(GgufConvert, Gemma3AddsOneToItsNormWeightsAndComputesTransformersLogits) {
  const testing::TempDir dir;
  const GgufFile f = convert(dir, "gemma3", DType::F32);
  EXPECT_EQ(f.get_string("general.architecture"), "gemma3");
  EXPECT_EQ(f.get_int("gemma3.attention.sliding_window"), 4);
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);  // tied
  for (const auto& [gguf, hf] :
       {std::pair<const char*, const char*>{"blk.2.post_ffw_norm.weight",
                                            "model.layers.2.post_feedforward_layernorm.weight"},
        {"blk.0.attn_q_norm.weight", "model.layers.0.self_attn.q_norm.weight"},
        {"output_norm.weight", "model.norm.weight"}}) {
    const std::vector<float> written = floats(f, gguf), stored = hf_floats("gemma3", hf);
    ASSERT_EQ(written.size(), stored.size()) << gguf;
    for (size_t i = 0; i < stored.size(); ++i)
      EXPECT_EQ(written[i], stored[i] + 1.0f) << gguf << "[" << i << "]";
  }
  const std::vector<float> attn_post = floats(f, "blk.1.post_attention_norm.weight");
  EXPECT_EQ(attn_post.front(),
            hf_floats("gemma3", "model.layers.1.post_attention_layernorm.weight").front() + 1.0f);
  expect_transformers_logits(dir, "gemma3");
}

// Gemma 3 4B+ (Gemma3ForConditionalGeneration): the language model becomes llama.cpp's
// "gemma3" file, its tensors without the "language_model." prefix; the vision tower's are left
// out (llama.cpp keeps those in a separate mmproj file); the file computes transformers' logits.
TEST(GgufConvert, AMultimodalGemma3ConvertsItsLanguageModel) {
  const testing::TempDir dir;
  const GgufFile f = convert(dir, "gemma3_vision", DType::F32);
  EXPECT_EQ(f.get_string("general.architecture"), "gemma3");
  EXPECT_EQ(f.get_int("gemma3.attention.head_count"), 8);  // a default the text_config left out
  EXPECT_NE(f.find_tensor("token_embd.weight"), nullptr);
  for (const GgufTensorInfo& t : f.tensors())
    EXPECT_TRUE(t.name.starts_with("blk.") || t.name.starts_with("token_embd") ||
                t.name.starts_with("output"))
        << t.name;
  expect_transformers_logits(dir, "gemma3_vision");
}

// Gemma 2: llama.cpp's "gemma2" with both soft caps stored, norms written 1 + w as for Gemma 3.
TEST(GgufConvert, Gemma2StoresItsSoftCapsAndComputesTransformersLogits) {
  const testing::TempDir dir;
  const GgufFile f = convert(dir, "gemma2", DType::F32);
  EXPECT_EQ(f.get_string("general.architecture"), "gemma2");
  EXPECT_EQ(f.get_float("gemma2.attn_logit_softcapping"), 2.0);
  EXPECT_EQ(f.get_float("gemma2.final_logit_softcapping"), 5.0);
  EXPECT_EQ(f.get_int("gemma2.attention.sliding_window"), 4);
  EXPECT_EQ(floats(f, "output_norm.weight").front(), hf_floats("gemma2", "model.norm.weight").front() + 1.0f);
  expect_transformers_logits(dir, "gemma2");
}

TEST(GgufConvert, Gpt2Conv1DWeightsAreTransposed) {
  const testing::TempDir dir;
  const GgufFile f = convert(dir, "gpt2", DType::F32);
  EXPECT_EQ(f.get_string("general.architecture"), "gpt2");
  EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("gpt2.attention.layer_norm_epsilon")), 1e-5f);
  const GgufTensorInfo* qkv = f.find_tensor("blk.0.attn_qkv.weight");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->shape, (std::vector<int64_t>{64, 192}));
  const auto hf = hf_floats("gpt2", "transformer.h.0.attn.c_attn.weight");  // [64 in, 192 out]
  const auto g = floats(f, "blk.0.attn_qkv.weight");                        // 192 rows of 64
  for (int64_t o = 0; o < 192; ++o)
    for (int64_t i = 0; i < 64; ++i) ASSERT_EQ(g[o * 64 + i], hf[i * 192 + o]) << o << "," << i;
  EXPECT_EQ(f.find_tensor("position_embd.weight")->shape, (std::vector<int64_t>{64, 128}));
  EXPECT_NE(f.find_tensor("output_norm.bias"), nullptr);
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
}

TEST(GgufConvert, ShardedMistralConverts) {
  const testing::TempDir dir;
  const GgufFile f = convert(dir, "mistral", DType::BF16);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("general.file_type"), 32);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 1);
  EXPECT_EQ(f.find_tensor("blk.1.attn_k.weight")->shape, (std::vector<int64_t>{64, 16}));
  EXPECT_EQ(f.tensors().size(), 2u + 2 * 9);
}

TEST(GgufConvert, SmolLmTokenizerTokenizesAsTheOriginal) {
  const testing::TempDir dir;
  const GgufFile f = convert(dir, "smollm_chat", DType::F16);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "smollm");
  EXPECT_EQ(f.array_size("tokenizer.ggml.tokens"), 512u);
  EXPECT_EQ(f.array_type("tokenizer.ggml.token_type"), GgufType::I32);
  EXPECT_EQ(f.get_int_array("tokenizer.ggml.token_type")[1], 3);  // <|im_start|> is CONTROL
  EXPECT_EQ(f.get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_FALSE(f.get_bool("tokenizer.ggml.add_bos_token"));
  const Tokenizer original = Tokenizer::from_model_dir(kHf / "smollm_chat");
  const Tokenizer converted = Tokenizer::from_gguf(f);
  EXPECT_EQ(converted.chat_template(), original.chat_template());
  EXPECT_EQ(converted.eos_id(), original.eos_id());
  const auto expected = read_json_file(kHf / "smollm_chat" / "expected.json");
  for (const auto& prompt : expected["text_prompts"]) {
    const std::string text = prompt["text"].get<std::string>();
    EXPECT_EQ(converted.encode(text), prompt["ids"].get<std::vector<int32_t>>()) << text;
  }
  const std::string rendered = expected["chat"]["rendered"].get<std::string>();
  EXPECT_EQ(converted.encode(rendered, {.parse_special = true}),
            expected["chat"]["ids"].get<std::vector<int32_t>>());
}

// Every tokenizer fixture: the written metadata, read back by tokenmill's GGUF vocab
// reader, encodes the whole corpus as the tokenizer.json does.
TEST(GgufConvert, TokenizerMetadataRoundTrips) {
  const auto corpus = read_json_file(kTokenizers / "corpus.json");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"gpt2", "gpt-2"},    {"llama3", "llama-bpe"}, {"qwen2", "qwen2"},   {"smollm", "smollm"},
      {"falcon", "falcon"}, {"spm_legacy", ""},      {"spm_metaspace", ""}};
  for (const auto& [name, pre] : cases) {
    SCOPED_TRACE(name);
    const TokenizerSpec spec = read_model_dir_tokenizer(kTokenizers / name);
    EXPECT_EQ(llama_cpp_pre_tokenizer(spec), pre);
    GgufWriter w;
    std::vector<std::string> notes;
    set_tokenizer_metadata(w, spec, static_cast<int64_t>(spec.tokens.size()) + 3,
                           [&](std::string_view line) { notes.emplace_back(line); });
    EXPECT_TRUE(notes.empty()) << notes.front();
    const std::string bytes = w.to_bytes();
    const GgufFile f = GgufFile::parse(std::as_bytes(std::span<const char>(bytes)), name);
    EXPECT_EQ(f.get_string("tokenizer.ggml.model"), pre.empty() ? "llama" : "gpt2");
    const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
    EXPECT_EQ(tokens.back(), fmt::format("[PAD{}]", spec.tokens.size() + 2));
    const Tokenizer original = Tokenizer::from_spec(spec);
    const Tokenizer converted = Tokenizer::from_gguf(f);
    size_t mismatches = 0;
    for (const auto& hex : corpus["inputs_hex"]) {
      std::string text;
      const std::string h = hex.get<std::string>();
      for (size_t i = 0; i + 1 < h.size(); i += 2)
        text += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
      // GGUF's add_space_prefix always prepends U+2581 (as llama.cpp does); HF's Metaspace
      // does not when the text already starts with a space or U+2581.
      if (name == "spm_metaspace" && (text.starts_with(' ') || text.starts_with("\xE2\x96\x81"))) continue;
      if (converted.encode(text) != original.encode(text) && ++mismatches <= 3)
        ADD_FAILURE() << "text: " << text;
    }
    EXPECT_EQ(mismatches, 0u);
  }
}

TEST(GgufConvert, UnknownPreTokenizerIsNamedDefaultWithANote) {
  const TokenizerSpec spec = read_model_dir_tokenizer(kTokenizers / "gpt2_prefix_lower");
  EXPECT_EQ(llama_cpp_pre_tokenizer(spec), "");
  GgufWriter w;
  std::string note;
  set_tokenizer_metadata(w, spec, static_cast<int64_t>(spec.tokens.size()),
                         [&](std::string_view l) { note = l; });
  EXPECT_NE(note.find("\"default\""), std::string::npos) << note;
}

// gpt-oss: llama.cpp's "gpt-oss": the sinks, the router's bias, the fused experts split into
// ffn_{gate,up,down}_exps (gate row j of an expert from column 2j of its gate_up_proj, up from
// 2j + 1) with their biases, post_attention_norm, YaRN's keys; the converted file computes
// transformers' logits. An MXFP4 checkpoint's experts stay MXFP4 whatever the file type, the
// blocks the Hugging Face loader makes of them.
TEST(GgufConvert, GptOssSplitsItsFusedExpertsAndComputesTransformersLogits) {
  const testing::TempDir dir;
  const GgufFile f = convert(dir, "gpt_oss", DType::F32);
  EXPECT_EQ(f.get_string("general.architecture"), "gpt-oss");
  EXPECT_EQ(f.get_int("gpt-oss.expert_feed_forward_length"), 32);
  EXPECT_EQ(f.get_int("gpt-oss.attention.sliding_window"), 4);
  EXPECT_EQ(f.get_string("gpt-oss.rope.scaling.type"), "yarn");
  EXPECT_EQ(f.get_int("gpt-oss.rope.scaling.original_context_length"), 16);
  const auto shape = [&](const char* name) { return f.find_tensor(name)->shape; };
  EXPECT_EQ(shape("blk.0.attn_sinks.weight"), (std::vector<int64_t>{4}));
  EXPECT_EQ(shape("blk.0.ffn_gate_inp.bias"), (std::vector<int64_t>{8}));
  EXPECT_EQ(shape("blk.0.post_attention_norm.weight"), (std::vector<int64_t>{64}));
  EXPECT_EQ(shape("blk.1.ffn_gate_exps.weight"), (std::vector<int64_t>{64, 32, 8}));
  EXPECT_EQ(shape("blk.1.ffn_down_exps.weight"), (std::vector<int64_t>{32, 64, 8}));
  EXPECT_EQ(shape("blk.1.ffn_up_exps.bias"), (std::vector<int64_t>{32, 8}));
  EXPECT_EQ(shape("blk.1.ffn_down_exps.bias"), (std::vector<int64_t>{64, 8}));
  const std::vector<float> gate_up =
      hf_floats("gpt_oss", "model.layers.1.mlp.experts.gate_up_proj");  // [8, 64, 64]
  const std::vector<float> up = floats(f, "blk.1.ffn_up_exps.weight");  // [8, 32, 64]
  for (const auto& [e, j, h] : {std::tuple{0, 0, 0}, std::tuple{3, 17, 5}, std::tuple{7, 31, 63}})
    EXPECT_EQ(up[static_cast<size_t>((e * 32 + j) * 64 + h)],
              gate_up[static_cast<size_t>((e * 64 + h) * 64 + 2 * j + 1)]);
  expect_transformers_logits(dir, "gpt_oss");

  const auto q8 = dir.path() / "gpt_oss_mxfp4.gguf";
  convert_hf_to_gguf(kHf / "gpt_oss_mxfp4", q8, {.type = DType::Q8_0});
  const GgufFile quantized = GgufFile::open(q8);
  EXPECT_EQ(quantized.find_tensor("blk.0.ffn_down_exps.weight")->type, quant::ggml_type_of(DType::MXFP4));
  EXPECT_EQ(quantized.find_tensor("blk.0.attn_q.weight")->type, quant::ggml_type_of(DType::Q8_0));
  const auto from_gguf = Model::load(q8), from_hf = Model::load(kHf / "gpt_oss_mxfp4");
  for (size_t l = 0; l < 2; ++l) {
    const LayerWeights &a = from_gguf->weights.layers[l], &b = from_hf->weights.layers[l];
    for (const auto& [x, y] :
         {std::pair{&a.expert_gate, &b.expert_gate}, std::pair{&a.expert_up, &b.expert_up},
          std::pair{&a.expert_down, &b.expert_down}}) {
      ASSERT_EQ(x->nbytes(), y->nbytes());
      EXPECT_EQ(std::memcmp(x->data, y->data, x->nbytes()), 0) << "layer " << l;
    }
  }
}

TEST(GgufConvert, Errors) {
  const testing::TempDir dir;
  expect_error([&] { convert_hf_to_gguf(dir.path() / "nope", dir.path() / "x.gguf", {}); },
               {"nope", "not a directory"});
  expect_error([&] { convert_hf_to_gguf(kHf / "llama", kHf / "llama", {}); }, {"directory"});
  const TokenizerSpec spec = read_model_dir_tokenizer(kTokenizers / "gpt2");
  GgufWriter w;
  expect_error([&] { set_tokenizer_metadata(w, spec, 10, {}); }, {"vocab_size is 10"});
  // SentencePiece-style BPE without byte fallback has no GGUF form (llama.cpp's always falls back to bytes).
  const TokenizerSpec unk = read_model_dir_tokenizer(kTokenizers / "spm_unk");
  expect_error([&] { set_tokenizer_metadata(w, unk, 2000, {}); }, {"spm_unk", "byte fallback"});
}

}  // namespace
}  // namespace tokenmill
