// TensorLayout: where a family's checkpoints keep each tensor the engine reads, in both
// formats (Hugging Face safetensors and GGUF), and how Hugging Face stores it. It is the one
// table of a family's tensor names: loading (model/weight_source.h), `tokenmill export`
// (model/hf_export.h) and `tokenmill convert` (convert/hf_to_gguf.h) all walk it.
//
// A module's tensors are its name + ".weight" and, where the config has a bias, ".bias".
// Per-layer modules follow `layer` with {} replaced by the layer index.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "model/model_config.h"

namespace tokenmill {

enum class WeightFormat : uint8_t { HuggingFace, Gguf };

// A module's name in each format; empty in both when the family has no such module.
struct ModuleName {
  std::string_view hf, gguf;

  std::string_view in(WeightFormat format) const { return format == WeightFormat::HuggingFace ? hf : gguf; }
  bool present() const { return !hf.empty(); }
};

struct TensorLayout {
  // Prefixed to every Hugging Face name but lm_head's: GPT-2's "transformer.", which Hub
  // checkpoints carry or not (a loader accepts both; an export writes it); a multimodal
  // checkpoint's "language_model.", which its tensors always carry (hf_prefix_required: the
  // tensors without it belong to other parts, a vision tower, which the engine does not read).
  std::string_view hf_prefix{};
  bool hf_prefix_required = false;
  ModuleName token_embedding{}, position_embedding{}, final_norm{}, lm_head{};
  ModuleName layer{};
  ModuleName attn_norm{}, o{}, mlp_norm{};
  // The norms after attention and MLP of a layer with norms on both sides (Gemma).
  ModuleName attn_post_norm{}, mlp_post_norm{};
  // Either gate and up, or one fused `gate_up` whose rows are [gate | up] (Phi-3).
  ModuleName gate{}, up{}, gate_up{};
  ModuleName down{};
  // Either q, k and v, or one fused `qkv` whose rows are [q | k | v].
  ModuleName q{}, k{}, v{}, qkv{};
  // The norms of q and k (config.qk_norm).
  ModuleName q_norm{}, k_norm{};
  // Mixture of experts: the router (a Linear [experts, hidden]), and the experts' gate, up
  // and down projections. Hugging Face keeps each expert's own Linear, {} standing for the
  // expert's index ("mlp.experts.{}.gate_proj"); GGUF stacks them in one tensor per layer
  // (ne = [cols, rows, experts]).
  ModuleName router{}, expert_gate{}, expert_up{}, expert_down{};
  // gpt-oss: Hugging Face keeps a layer's experts in one module of fused tensors
  // (model/fused_experts.h), here its name ("mlp.experts"); GGUF as expert_gate/up/down.
  std::string_view hf_fused_experts{};
  // gpt-oss: each layer's attention sinks (config.attention_sinks), a parameter Hugging Face
  // names whole ("self_attn.sinks", no ".weight"), GGUF as a module ("attn_sinks").
  ModuleName attn_sinks{};
  // Hugging Face stores Linear weights [in, out] (GPT-2's Conv1D), the engine and GGUF
  // [out, in].
  bool hf_transposed_linears = false;

  // A layer's modules in one order, each with whether it is a Linear (else a norm); the
  // modules the family lacks are among them, not present(). The experts are not (one
  // module per expert in Hugging Face checkpoints).
  struct LayerModule {
    ModuleName name;
    bool linear;
  };
  std::array<LayerModule, 16> layer_modules() const {
    return {{{attn_norm, false},
             {q, true},
             {k, true},
             {v, true},
             {qkv, true},
             {q_norm, false},
             {k_norm, false},
             {o, true},
             {attn_post_norm, false},
             {mlp_norm, false},
             {gate, true},
             {up, true},
             {gate_up, true},
             {down, true},
             {mlp_post_norm, false},
             {router, true}}};
  }
};

// The layout of `config`'s family (config.model_type).
const TensorLayout& tensor_layout(const ModelConfig& config);

// The full name of per-layer module `module` of layer `layer` in `format`, without the
// ".weight" / ".bias" suffix and without the Hugging Face prefix. An expert module's name
// keeps the {} of its expert index (expert_name fills it).
std::string layer_module_name(const TensorLayout& layout, WeightFormat format, int64_t layer,
                              ModuleName module);
// `name` with its {} replaced by `expert`.
std::string expert_name(std::string_view name, int64_t expert);

}  // namespace tokenmill
