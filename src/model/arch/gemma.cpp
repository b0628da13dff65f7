// Gemma 2 (Gemma2ForCausalLM) and Gemma 3 (Gemma3ForCausalLM, model type gemma3_text: the
// text-only checkpoints, Gemma 3 1B and 270M). Both: GeGLU MLPs (tanh GELU), norms before and
// after attention and MLP, RMSNorm by (1 + weight), token embeddings times sqrt(hidden_size),
// scores scaled by query_pre_attn_scalar^-1/2, sliding-window layers beside global ones
// (layer_types, or all but every sliding_window_pattern-th layer: Gemma 2 alternates, Gemma 3
// has 5 sliding to 1 global). Gemma 2 soft-caps the attention scores and the final logits;
// Gemma 3 has per-head q/k norms and its own RoPE base for the sliding layers. llama.cpp's
// GGUF "gemma2" / "gemma3" name the same tensors (their norm weights already hold 1 + weight).
// Gemma 3 4B / 12B / 27B ship as Gemma3ForConditionalGeneration (model type gemma3): a vision
// tower beside the same language model, whose config sits under text_config and whose tensors
// under "language_model."; tokenmill runs the language model (text in, text out), and exports
// it as the text-only Gemma3ForCausalLM.
#include <cmath>

#include "model/arch/families.h"
#include "model/arch/gemma_gguf.h"

namespace tokenmill {

// kLlamaLayout is constant-initialised (string literals only), so it is ready here.
const TensorLayout kGemmaLayout = [] {
  TensorLayout layout = kLlamaLayout;
  layout.attn_post_norm = {"post_attention_layernorm", "post_attention_norm"};
  layout.mlp_norm = {"pre_feedforward_layernorm", "ffn_norm"};
  layout.mlp_post_norm = {"post_feedforward_layernorm", "post_ffw_norm"};
  return layout;
}();

std::vector<bool> read_sliding_layers(const FieldReader& f, int64_t layers, int64_t pattern) {
  std::vector<bool> sliding(static_cast<size_t>(layers));
  if (f.has("layer_types")) {
    const nlohmann::json& types = f.raw("layer_types");
    if (!types.is_array() || static_cast<int64_t>(types.size()) != layers)
      fail("{}: layer_types must list one type for each of the {} layers", f.source(), layers);
    for (size_t i = 0; i < sliding.size(); ++i) {
      if (types[i] != "sliding_attention" && types[i] != "full_attention")
        fail("{}: layer_types[{}] = {} (expected \"sliding_attention\" or \"full_attention\")", f.source(), i,
             types[i].dump());
      sliding[i] = types[i] == "sliding_attention";
    }
    return sliding;
  }
  const int64_t every = f.integer_or("sliding_window_pattern", pattern, 1, kMaxLayers);
  for (size_t i = 0; i < sliding.size(); ++i) sliding[i] = (static_cast<int64_t>(i) + 1) % every != 0;
  return sliding;
}

namespace {

// RoPE: transformers >= 5 keeps each layer type's parameters under rope_parameters
// ({"full_attention": {...}, "sliding_attention": {...}}); earlier files rope_theta and
// rope_scaling for the global layers and rope_local_base_freq for the sliding ones.
void read_gemma3_rope(const FieldReader& f, ModelConfig& c) {
  constexpr double kGlobalTheta = 1e6, kLocalTheta = 1e4;  // transformers' defaults
  const bool per_type = f.has("rope_parameters") && f.raw("rope_parameters").contains("full_attention");
  if (!per_type) {
    parse_rope(f, c);
    if (!f.has("rope_theta") && !f.has("rope_parameters")) c.rope_theta = kGlobalTheta;
    c.sliding_rope_theta = f.number_or("rope_local_base_freq", kLocalTheta, 1e-6, 1e12);
    return;
  }
  const std::string where = f.source() + ": rope_parameters";
  const FieldReader types(f.raw("rope_parameters"), where);
  parse_rope(FieldReader(nlohmann::json{{"rope_theta", kGlobalTheta},
                                        {"rope_parameters", types.raw("full_attention")}},
                         where + ".full_attention"),
             c);
  ModelConfig sliding;
  if (types.has("sliding_attention"))
    parse_rope(FieldReader(nlohmann::json{{"rope_theta", kLocalTheta},
                                          {"rope_parameters", types.raw("sliding_attention")}},
                           where + ".sliding_attention"),
               sliding);
  else
    sliding.rope_theta = kLocalTheta;
  if (sliding.rope_scaling.rope_type != "default")
    fail("{}.sliding_attention: rope type '{}' is not supported for the sliding layers", where,
         sliding.rope_scaling.rope_type);
  c.sliding_rope_theta = sliding.rope_theta;
}

// The fields Gemma 2 and 3 share; `pattern` is the family's default sliding_window_pattern.
void read_gemma_config(const FieldReader& f, ModelConfig& c, int64_t pattern) {
  read_layer_sizes(f, c);
  c.head_dim = f.integer_or("head_dim", 256, 1, kMaxDimension);
  c.max_position_embeddings = f.integer_or("max_position_embeddings", 8192, 1, kMaxPositions);
  c.norm = NormKind::RmsNorm;
  c.norm_eps = f.number_or("rms_norm_eps", 1e-6, 0.0, 1.0);
  const std::string activation =
      f.string_or("hidden_activation", f.string_or("hidden_act", "gelu_pytorch_tanh"));
  if (parse_activation(activation, f.source()) != MlpKind::GeluTanh)
    fail("{}: hidden_activation '{}' is not supported for {} (expected gelu_pytorch_tanh)", f.source(),
         activation, c.architecture);
  c.mlp = MlpKind::GeGlu;
  c.positions = PositionKind::Rotary;
  c.attention_qkv_bias = c.attention_out_bias = f.boolean_or("attention_bias", false);
  c.tie_word_embeddings = f.boolean_or("tie_word_embeddings", true);
  c.sandwich_norms = true;
  c.norm_weight_offset = true;
  c.scale_embeddings = true;
  c.query_pre_attn_scalar = f.number_or("query_pre_attn_scalar", 256.0, 1e-6, 1e12);
  c.attn_logit_softcapping = f.number_or("attn_logit_softcapping", 0.0, 0.0, 1e6);
  c.final_logit_softcapping = f.number_or("final_logit_softcapping", 0.0, 0.0, 1e6);
  if (f.boolean_or("use_bidirectional_attention", false))
    fail("{}: use_bidirectional_attention=true (an encoder, not a causal language model) is not supported",
         f.source());
  c.sliding_window = f.integer_or("sliding_window", 0, 0, kMaxPositions);
  if (c.sliding_window > 0) c.sliding_layers = read_sliding_layers(f, c.num_hidden_layers, pattern);
}

// Gemma 2: every other layer slides (the first does); one RoPE for all layers.
void read_gemma2_config(const FieldReader& f, ModelConfig& c) {
  read_gemma_config(f, c, 2);
  parse_rope(f, c);
}

// Gemma3TextConfig's defaults (transformers), for the fields a config.json leaves out: the
// Hub's Gemma 3 4B+ text_config lists only what differs (not even the head counts).
nlohmann::json gemma3_text_defaults() {
  return {{"vocab_size", 262208},
          {"hidden_size", 2304},
          {"intermediate_size", 9216},
          {"num_hidden_layers", 26},
          {"num_attention_heads", 8},
          {"num_key_value_heads", 4},
          {"head_dim", 256},
          {"hidden_activation", "gelu_pytorch_tanh"},
          {"max_position_embeddings", 131072},
          {"rms_norm_eps", 1e-6},
          {"query_pre_attn_scalar", 256},
          {"sliding_window", 4096},
          {"tie_word_embeddings", true}};
}

// `fields` over Gemma3TextConfig's defaults.
nlohmann::json with_gemma3_text_defaults(const nlohmann::json& fields) {
  nlohmann::json merged = gemma3_text_defaults();
  for (const auto& [key, value] : fields.items())
    if (!value.is_null()) merged[key] = value;
  return merged;
}

void read_gemma3_text_fields(const FieldReader& f, ModelConfig& c) {
  read_gemma_config(f, c, 6);
  c.qk_norm = QkNorm::PerHead;
  read_gemma3_rope(f, c);
}

void read_gemma3_config(const FieldReader& f, ModelConfig& c) {
  read_gemma3_text_fields(FieldReader(with_gemma3_text_defaults(f.object()), f.source()), c);
}

// Gemma3ForConditionalGeneration: the language model's fields under text_config.
void read_gemma3_vision_config(const FieldReader& f, ModelConfig& c) {
  if (!f.has("text_config") || !f.raw("text_config").is_object())
    fail("{}: missing 'text_config' (the language model's configuration) for {}", f.source(), c.architecture);
  read_gemma3_text_fields(
      FieldReader(with_gemma3_text_defaults(f.raw("text_config")), f.source() + ": text_config"), c);
}

// The config.json of the text-only Gemma3ForCausalLM holding a Gemma3ForConditionalGeneration's
// language model: its text_config (with the defaults it left out) and the outer file's token ids.
nlohmann::json gemma3_text_config_json(const nlohmann::json& multimodal) {
  nlohmann::json text = with_gemma3_text_defaults(multimodal.value("text_config", nlohmann::json::object()));
  text["architectures"] = {"Gemma3ForCausalLM"};
  text["model_type"] = "gemma3_text";
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"})
    if (multimodal.contains(key) && !text.contains(key)) text[key] = multimodal[key];
  return text;
}

// The language model's tensors sit under "language_model." (not optional here); the vision
// tower's and the projector's are not the engine's.
const TensorLayout kGemma3VisionLayout = [] {
  TensorLayout layout = kGemmaLayout;
  layout.hf_prefix = "language_model.";
  layout.hf_prefix_required = true;
  return layout;
}();

}  // namespace

std::optional<GemmaGgufRules> gemma_gguf_rules(std::string_view gguf_arch) {
  if (gguf_arch == "gemma2")
    return GemmaGgufRules{.sliding_pattern = 2, .wide_scale_layers = 46, .sliding_rope_theta = 0};
  if (gguf_arch == "gemma3")
    return GemmaGgufRules{.sliding_pattern = 6, .wide_scale_layers = 62, .sliding_rope_theta = 1e4};
  return std::nullopt;
}

const Architecture kGemma2Architecture = {"Gemma2ForCausalLM", "gemma2", "gemma2", &kGemmaLayout,
                                          read_gemma2_config};
const Architecture kGemma3Architecture = {"Gemma3ForCausalLM", "gemma3_text", "gemma3", &kGemmaLayout,
                                          read_gemma3_config};
const Architecture kGemma3VisionArchitecture = {
    "Gemma3ForConditionalGeneration",
    "gemma3",
    "gemma3",
    &kGemma3VisionLayout,
    read_gemma3_vision_config,
    {&kGemma3Architecture, gemma3_text_config_json, "model.language_model.layers.{}."}};

}  // namespace tokenmill
