#include "model/shape_presets.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tokenmill {

namespace {

// The config.json fields the engine reads, with their published values.
ShapePreset preset(std::string name, std::string config_source, int64_t published_parameters,
                   std::string parameters_source, const nlohmann::json& config) {
  ModelConfig parsed = parse_model_config(config, "the " + name + " shape");
  return {std::move(name), std::move(config_source), published_parameters, std::move(parameters_source),
          std::move(parsed)};
}

std::vector<ShapePreset> make_presets() {
  std::vector<ShapePreset> presets;
  presets.push_back(preset("gpt2-124m", "https://huggingface.co/openai-community/gpt2/blob/main/config.json",
                           124'000'000,
                           "the model card: \"the smallest version of GPT-2, with 124M parameters\"",
                           {{"architectures", {"GPT2LMHeadModel"}},
                            {"model_type", "gpt2"},
                            {"vocab_size", 50257},
                            {"n_embd", 768},
                            {"n_layer", 12},
                            {"n_head", 12},
                            {"n_positions", 1024},
                            {"n_inner", nullptr},
                            {"activation_function", "gelu_new"},
                            {"layer_norm_epsilon", 1e-5}}));
  presets.push_back(preset("smollm2-135m",
                           "https://huggingface.co/HuggingFaceTB/SmolLM2-135M/blob/main/config.json",
                           135'000'000, "the model name and card (SmolLM2 \"135M\")",
                           {{"architectures", {"LlamaForCausalLM"}},
                            {"model_type", "llama"},
                            {"vocab_size", 49152},
                            {"hidden_size", 576},
                            {"intermediate_size", 1536},
                            {"num_hidden_layers", 30},
                            {"num_attention_heads", 9},
                            {"num_key_value_heads", 3},
                            {"head_dim", 64},
                            {"max_position_embeddings", 8192},
                            {"rms_norm_eps", 1e-5},
                            {"rope_theta", 100000},
                            {"tie_word_embeddings", true}}));
  presets.push_back(preset("qwen2.5-0.5b", "https://huggingface.co/Qwen/Qwen2.5-0.5B/blob/main/config.json",
                           490'000'000, "the model card: \"Number of Parameters: 0.49B\"",
                           {{"architectures", {"Qwen2ForCausalLM"}},
                            {"model_type", "qwen2"},
                            {"vocab_size", 151936},
                            {"hidden_size", 896},
                            {"intermediate_size", 4864},
                            {"num_hidden_layers", 24},
                            {"num_attention_heads", 14},
                            {"num_key_value_heads", 2},
                            {"max_position_embeddings", 32768},
                            {"rms_norm_eps", 1e-6},
                            {"rope_theta", 1000000.0},
                            {"use_sliding_window", false},
                            {"tie_word_embeddings", true}}));
  presets.push_back(preset("llama-3.2-1b",
                           "https://huggingface.co/meta-llama/Llama-3.2-1B/blob/main/config.json",
                           1'230'000'000, "the model card's table: \"1.23B\" parameters",
                           {{"architectures", {"LlamaForCausalLM"}},
                            {"model_type", "llama"},
                            {"vocab_size", 128256},
                            {"hidden_size", 2048},
                            {"intermediate_size", 8192},
                            {"num_hidden_layers", 16},
                            {"num_attention_heads", 32},
                            {"num_key_value_heads", 8},
                            {"head_dim", 64},
                            {"max_position_embeddings", 131072},
                            {"rms_norm_eps", 1e-5},
                            {"rope_theta", 500000.0},
                            {"rope_scaling",
                             {{"rope_type", "llama3"},
                              {"factor", 32.0},
                              {"low_freq_factor", 1.0},
                              {"high_freq_factor", 4.0},
                              {"original_max_position_embeddings", 8192}}},
                            {"tie_word_embeddings", true}}));
  presets.push_back(preset("mistral-7b",
                           "https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json",
                           7'240'000'000, "the Hugging Face model page: \"Model size 7.24B params\"",
                           {{"architectures", {"MistralForCausalLM"}},
                            {"model_type", "mistral"},
                            {"vocab_size", 32000},
                            {"hidden_size", 4096},
                            {"intermediate_size", 14336},
                            {"num_hidden_layers", 32},
                            {"num_attention_heads", 32},
                            {"num_key_value_heads", 8},
                            {"max_position_embeddings", 32768},
                            {"sliding_window", 4096},
                            {"rms_norm_eps", 1e-5},
                            {"rope_theta", 10000.0},
                            {"tie_word_embeddings", false}}));
  presets.push_back(preset("llama-3-8b",
                           "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json",
                           8'030'000'000, "the Hugging Face model page: \"Model size 8.03B params\"",
                           {{"architectures", {"LlamaForCausalLM"}},
                            {"model_type", "llama"},
                            {"vocab_size", 128256},
                            {"hidden_size", 4096},
                            {"intermediate_size", 14336},
                            {"num_hidden_layers", 32},
                            {"num_attention_heads", 32},
                            {"num_key_value_heads", 8},
                            {"max_position_embeddings", 8192},
                            {"rms_norm_eps", 1e-5},
                            {"rope_theta", 500000.0},
                            {"tie_word_embeddings", false}}));
  return presets;
}

}  // namespace

const std::vector<ShapePreset>& shape_presets() {
  static const std::vector<ShapePreset> presets = make_presets();
  return presets;
}

const ShapePreset& shape_preset(const std::string& name) {
  std::string names;
  for (const ShapePreset& p : shape_presets()) {
    if (p.name == name) return p;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  fail("unknown --shape '{}': the known shapes are {} (`tokenmill bench --shape list` describes them)", name,
       names);
}

}  // namespace tokenmill
