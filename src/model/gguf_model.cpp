#include "model/gguf_model.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/arch/architecture.h"
#include "model/arch/gemma_gguf.h"
#include "model/weight_source.h"
#include "quant/quant_formats.h"
#include "quant/quant_reference.h"

namespace tokenmill {

namespace {

// `{arch}.{suffix}` metadata of one file, with errors that name the file.
class GgufKeys {
 public:
  GgufKeys(const GgufFile& gguf, std::string arch) : gguf_(gguf), arch_(std::move(arch)) {}

  std::string key(const char* suffix) const { return arch_ + "." + suffix; }
  int64_t integer(const char* suffix) const { return gguf_.get_int(key(suffix)); }
  std::optional<int64_t> find_integer(const char* suffix) const { return gguf_.find_int(key(suffix)); }
  std::optional<double> find_number(const char* suffix) const { return gguf_.find_float(key(suffix)); }

 private:
  const GgufFile& gguf_;
  std::string arch_;
};

// Rows of a 2-D tensor (ne[1]), or nullopt when absent.
std::optional<int64_t> tensor_rows(const GgufFile& gguf, const char* name) {
  const GgufTensorInfo* t = gguf.find_tensor(name);
  if (t == nullptr || t->shape.size() != 2) return std::nullopt;
  return t->shape[1];
}

// rope.scaling.* as config.json's rope_scaling. YaRN as llama.cpp runs it: its ramp's bounds
// always truncated to whole dimensions (transformers' truncate: true), its attention factor
// 0.1 ln(factor) + 1 times rope.scaling.attn_factor.
void put_rope_scaling(const GgufFile& gguf, const GgufKeys& keys, nlohmann::json& hf) {
  const std::string type = gguf.find_string(keys.key("rope.scaling.type")).value_or("none");
  if (type == "none") return;
  if (type != "linear" && type != "yarn")
    fail(
        "{}: rope scaling '{}' ({}) is not supported (supported: none, linear, yarn, and llama 3's "
        "rope_freqs)",
        gguf.label(), type, keys.key("rope.scaling.type"));
  const auto factor = keys.find_number("rope.scaling.factor");
  if (!factor) fail("{}: {} rope scaling needs {}", gguf.label(), type, keys.key("rope.scaling.factor"));
  hf["rope_scaling"] = {{"rope_type", type}, {"factor", *factor}};
  if (type == "linear") return;
  nlohmann::json& yarn = hf["rope_scaling"];
  yarn["original_max_position_embeddings"] = keys.integer("rope.scaling.original_context_length");
  if (auto beta = keys.find_number("rope.scaling.yarn_beta_fast")) yarn["beta_fast"] = *beta;
  if (auto beta = keys.find_number("rope.scaling.yarn_beta_slow")) yarn["beta_slow"] = *beta;
  if (auto scale = keys.find_number("rope.scaling.attn_factor"))
    yarn["attention_factor"] = (*factor > 1.0 ? 0.1 * std::log(*factor) + 1.0 : 1.0) * *scale;
}

// A 1-D tensor of n values as f32 (LongRoPE's factors); errors name the file and tensor.
std::vector<float> f32_vector(const GgufFile& gguf, const char* name, int64_t n) {
  const GgufTensorInfo* info = gguf.find_tensor(name);
  if (info == nullptr) fail("{}: tensor '{}' is missing", gguf.label(), name);
  const auto dtype = quant::dtype_from_ggml_type(info->type);
  if (info->shape != std::vector<int64_t>{n} || !dtype || is_quantized(*dtype))
    fail("{}: tensor '{}' must be a float vector of {} values (ne = [{}])", gguf.label(), name, n,
         fmt::join(info->shape, ", "));
  std::vector<float> out(static_cast<size_t>(n));
  quant::dequantize_row(*dtype, gguf.tensor_data(*info).data(), out.data(), n);
  return out;
}

// LongRoPE as llama.cpp's phi3 files hold it: the factor lists as tensors, the original
// context (by default the training context, as llama.cpp) and the attention factor (by
// default 1) as keys.
void read_longrope(const GgufFile& gguf, const GgufKeys& keys, ModelConfig& c) {
  RopeScaling& s = c.rope_scaling;
  s.rope_type = "longrope";
  s.long_factor = f32_vector(gguf, "rope_factors_long.weight", c.rotary_dim / 2);
  s.short_factor = f32_vector(gguf, "rope_factors_short.weight", c.rotary_dim / 2);
  s.original_max_position_embeddings =
      keys.find_integer("rope.scaling.original_context_length").value_or(c.max_position_embeddings);
  if (s.original_max_position_embeddings < 1)
    fail("{}: {} must be >= 1", gguf.label(), keys.key("rope.scaling.original_context_length"));
  s.attention_factor = keys.find_number("rope.scaling.attn_factor").value_or(1.0);
  if (!(s.attention_factor > 0) || !std::isfinite(s.attention_factor))
    fail("{}: {} must be a finite number > 0", gguf.label(), keys.key("rope.scaling.attn_factor"));
}

// The Hugging Face config.json fields of a llama/qwen2/qwen3/phi3/olmo2 file.
void put_llama_family(const GgufFile& gguf, const GgufKeys& keys, nlohmann::json& hf) {
  hf["hidden_size"] = keys.integer("embedding_length");
  hf["intermediate_size"] = keys.integer("feed_forward_length");
  hf["num_hidden_layers"] = keys.integer("block_count");
  hf["num_attention_heads"] = keys.integer("attention.head_count");
  if (auto kv = keys.find_integer("attention.head_count_kv")) hf["num_key_value_heads"] = *kv;
  if (auto head_dim = keys.find_integer("attention.key_length")) hf["head_dim"] = *head_dim;
  hf["max_position_embeddings"] = keys.integer("context_length");
  hf["rms_norm_eps"] = gguf.get_float(keys.key("attention.layer_norm_rms_epsilon"));
  if (auto theta = keys.find_number("rope.freq_base")) hf["rope_theta"] = *theta;
  put_rope_scaling(gguf, keys, hf);
  hf["tie_word_embeddings"] = gguf.find_tensor("output.weight") == nullptr;
  // Llama's attention_bias (and gpt-oss's): biases on q, k, v and the output projection.
  if (gguf.find_tensor("blk.0.attn_output.bias") != nullptr) hf["attention_bias"] = true;
  if (auto experts = keys.find_integer("expert_count"); experts && *experts > 0) {
    hf["num_local_experts"] = hf["num_experts"] = *experts;
    hf["num_experts_per_tok"] = keys.integer("expert_used_count");
    if (auto width = keys.find_integer("expert_feed_forward_length")) hf["moe_intermediate_size"] = *width;
    // llama.cpp renormalises the chosen experts' weights of these families unless told otherwise.
    hf["norm_topk_prob"] = gguf.find_bool(keys.key("expert_weights_norm")).value_or(true);
  }
}

// A Gemma file's fields llama.cpp derives (GemmaGgufRules), derived as it does, and its soft caps.
void put_gemma(const GemmaGgufRules& rules, const GgufKeys& keys, nlohmann::json& hf) {
  hf["sliding_window_pattern"] = rules.sliding_pattern;
  // llama.cpp's converter now writes the sliding layers' base; older files leave it to the rule.
  const double sliding_theta = keys.find_number("rope.freq_base_swa").value_or(rules.sliding_rope_theta);
  if (sliding_theta > 0) hf["rope_local_base_freq"] = sliding_theta;
  const int64_t layers = hf["num_hidden_layers"].get<int64_t>(), hidden = hf["hidden_size"].get<int64_t>();
  const int64_t heads = hf["num_attention_heads"].get<int64_t>();
  const int64_t head_dim = keys.find_integer("attention.key_length").value_or(heads > 0 ? hidden / heads : 0);
  hf["query_pre_attn_scalar"] = gemma_gguf_query_scalar(rules, layers, hidden, heads, head_dim);
  for (const char* cap : {"attn_logit_softcapping", "final_logit_softcapping"})
    if (auto value = keys.find_number(cap); value && *value > 0) hf[cap] = *value;
}

void put_gpt2(const GgufFile& gguf, const GgufKeys& keys, nlohmann::json& hf) {
  hf["n_embd"] = keys.integer("embedding_length");
  hf["n_inner"] = keys.integer("feed_forward_length");
  hf["n_layer"] = keys.integer("block_count");
  hf["n_head"] = keys.integer("attention.head_count");
  hf["n_positions"] = keys.integer("context_length");
  hf["layer_norm_epsilon"] = gguf.get_float(keys.key("attention.layer_norm_epsilon"));
  hf["activation_function"] = "gelu_new";
  hf["tie_word_embeddings"] = gguf.find_tensor("output.weight") == nullptr;
}

// A view of one tensor of the file, or a named error.
class GgufWeightSource final : public WeightSource {
 public:
  GgufWeightSource(const GgufFile& gguf, TensorStore& store) : gguf_(gguf), store_(store) {}

  bool has(const std::string& name) const override { return gguf_.find_tensor(name) != nullptr; }

  // GGUF's ne = [cols, rows].
  Tensor matrix(const std::string& name, int64_t rows, int64_t cols) const override {
    const GgufTensorInfo& info = find(name, {cols, rows});
    return Tensor(const_cast<std::byte*>(gguf_.tensor_data(info).data()), weight_dtype(info), {rows, cols});
  }

  // GGUF stacks a layer's experts in one tensor: ne = [cols, rows, count]. Files from
  // llama.cpp before April 2024 (the first Mixtral GGUFs) keep one tensor per expert,
  // blk.N.ffn_gate.E.weight for blk.N.ffn_gate_exps.weight: those are copied into one stack,
  // as llama.cpp does when it loads them.
  Tensor experts(const std::string& name, int64_t count, int64_t rows, int64_t cols) const override {
    const size_t at = name.find("_exps.");
    if (!has(name) && at != std::string::npos) {
      const auto names = [&](int64_t e) {
        return fmt::format("{}.{}{}", name.substr(0, at), e, name.substr(at + 5));
      };
      if (has(names(0)))
        return stack_experts(
            store_, count, [&](int64_t e) { return matrix(names(e), rows, cols); }, names);
    }
    const GgufTensorInfo& info = find(name, {cols, rows, count});
    return Tensor(const_cast<std::byte*>(gguf_.tensor_data(info).data()), weight_dtype(info),
                  {count * rows, cols});
  }

  // ne = [rows, count].
  Tensor expert_biases(const std::string& name, int64_t count, int64_t rows) const override {
    return f32_copy(find(name, {rows, count}), count * rows);
  }

  Tensor vector_f32(const std::string& name, int64_t n) const override {
    return f32_copy(find(name, {n}), n);
  }

 private:
  const GgufTensorInfo& find(const std::string& name, std::initializer_list<int64_t> ne) const {
    const GgufTensorInfo* info = gguf_.find_tensor(name);
    if (info == nullptr) fail("{}: tensor '{}' is missing", gguf_.label(), name);
    if (!std::equal(info->shape.begin(), info->shape.end(), ne.begin(), ne.end()))
      fail("{}: tensor '{}' has ne = [{}] but the model's hyper-parameters need [{}]", gguf_.label(), name,
           fmt::join(info->shape, ", "), fmt::join(ne, ", "));
    return *info;
  }

  // The n elements of tensor `info` as f32.
  Tensor f32_copy(const GgufTensorInfo& info, int64_t n) const {
    Tensor out = store_.allocate(DType::F32, {n});
    quant::dequantize_row(weight_dtype(info), gguf_.tensor_data(info).data(), out.as<float>(), n);
    return out;
  }

  DType weight_dtype(const GgufTensorInfo& info) const {
    const auto dtype = quant::dtype_from_ggml_type(info.type);
    const auto traits = ggml_type_traits(info.type);
    if (!dtype || *dtype == DType::Q8_1 || *dtype == DType::Q8_K)
      fail(
          "{}: tensor '{}' is stored as {}, which tokenmill does not run (supported: F32, F16, BF16, Q4_0, "
          "Q4_1, Q5_0, Q5_1, Q8_0, MXFP4, Q4_K, Q5_K, Q6_K); requantize the model with `tokenmill quantize`",
          gguf_.label(), info.name, traits ? traits->name : "an unknown type");
    return *dtype;
  }

  const GgufFile& gguf_;
  TensorStore& store_;
};

}  // namespace

ModelConfig gguf_model_config(const GgufFile& gguf) {
  const std::string arch = gguf.get_string("general.architecture");
  const GgufKeys keys(gguf, arch);
  nlohmann::json hf;
  const Architecture* architecture =
      find_gguf_architecture(arch, keys.find_integer("expert_count").value_or(0) > 0);
  if (architecture == nullptr)
    fail("{}: general.architecture '{}' is not supported (supported: {})", gguf.label(), arch,
         supported_gguf_architectures());
  hf["architectures"] = {std::string(architecture->hf_class)};
  if (arch == "gpt2") {
    put_gpt2(gguf, keys, hf);
  } else {
    put_llama_family(gguf, keys, hf);
    if (auto window = keys.find_integer("attention.sliding_window")) {
      hf["sliding_window"] = *window;
      // llama.cpp's "llama" files hold Llama and Mistral alike; the window `convert` writes for
      // Mistral makes it Mistral again (Llama's config has no window).
      if (hf["architectures"][0] == "LlamaForCausalLM" && *window > 0)
        hf["architectures"] = {"MistralForCausalLM"};
    }
    if (const auto rules = gemma_gguf_rules(arch)) put_gemma(*rules, keys, hf);
  }
  const auto vocab = keys.find_integer("vocab_size");
  const auto embedding_rows = tensor_rows(gguf, "token_embd.weight");
  if (!vocab && !embedding_rows)
    fail("{}: no {} and no 2-D token_embd.weight", gguf.label(), keys.key("vocab_size"));
  hf["vocab_size"] = vocab ? *vocab : *embedding_rows;
  if (auto bos = gguf.find_int("tokenizer.ggml.bos_token_id")) hf["bos_token_id"] = *bos;
  if (auto eos = gguf.find_int("tokenizer.ggml.eos_token_id")) hf["eos_token_id"] = *eos;

  ModelConfig c = parse_model_config(hf, gguf.label() + " (GGUF metadata)");
  if (arch == "llama") c.rope_layout = RopeLayout::Interleaved;
  if (c.positions == PositionKind::Rotary) {
    c.rotary_dim = keys.find_integer("rope.dimension_count").value_or(c.head_dim);
    check_rotary(c, gguf.label() + " (" + keys.key("rope.dimension_count") + ")");
    if (gguf.find_tensor("rope_factors_long.weight") != nullptr) read_longrope(gguf, keys, c);
  }
  for (int32_t id : c.eos_token_ids)
    if (id >= c.vocab_size)
      fail("{}: tokenizer.ggml.eos_token_id {} is not below the vocabulary size {}", gguf.label(), id,
           c.vocab_size);
  return c;
}

void load_gguf_weights(const ModelConfig& config, const GgufFile& gguf, ModelWeights& weights) {
  const GgufWeightSource source(gguf, weights.owned);
  load_layout_weights(config, source, WeightFormat::Gguf, weights);
  if (config.positions == PositionKind::Rotary && source.has("rope_freqs.weight"))
    weights.rope_freq_factors = source.vector_f32("rope_freqs.weight", config.rotary_dim / 2);
}

}  // namespace tokenmill
