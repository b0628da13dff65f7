#include "convert/hf_to_gguf.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <numbers>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "formats/safetensors.h"
#include "model/arch/architecture.h"
#include "model/arch/gemma_gguf.h"
#include "model/fused_experts.h"
#include "model/model_config.h"
#include "model/rope.h"
#include "quant/quant_formats.h"
#include "tokenizer/tokenizer_json.h"

namespace tokenmill {

namespace {

// AddOne: Gemma's norm weights w become the 1 + w they multiply by (llama.cpp's files hold that).
enum class Transform { None, PermuteHeads, Transpose, AddOne };

// Where an HF tensor goes: its GGUF name, and how its rows are rearranged.
struct Mapping {
  std::string name;
  Transform transform = Transform::None;
  int64_t heads = 0;    // PermuteHeads: the number of heads the rows are grouped in
  int64_t expert = -1;  // an expert's matrix: its index in the stacked tensor `name`
};

// The N of `name` when it is `pattern` with its {} replaced by a number N.
std::optional<int64_t> expert_index(std::string_view name, std::string_view pattern) {
  const size_t at = pattern.find("{}");
  if (at == std::string_view::npos) return std::nullopt;
  const std::string_view head = pattern.substr(0, at), tail = pattern.substr(at + 2);
  if (!name.starts_with(head) || !name.ends_with(tail) || name.size() <= head.size() + tail.size())
    return std::nullopt;
  const std::string_view digits = name.substr(head.size(), name.size() - head.size() - tail.size());
  if (digits.size() > 6 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(std::string(digits));
}

// "model.layers.12.rest" -> (12, "rest") when `hf` starts with `prefix` + a layer number.
std::optional<std::pair<int64_t, std::string>> split_layer(const std::string& hf, const std::string& prefix) {
  if (!hf.starts_with(prefix)) return std::nullopt;
  size_t i = prefix.size();
  int64_t layer = 0;
  const size_t digits = i;
  while (i < hf.size() && hf[i] >= '0' && hf[i] <= '9' && i - digits < 9)
    layer = layer * 10 + (hf[i++] - '0');
  if (i == digits || i >= hf.size() || hf[i] != '.') return std::nullopt;
  return std::make_pair(layer, hf.substr(i + 1));
}

// "q_proj.weight" -> ("q_proj", ".weight").
std::pair<std::string, std::string> split_suffix(const std::string& s) {
  for (const char* suffix : {".weight", ".bias"})
    if (s.ends_with(suffix)) return {s.substr(0, s.size() - std::strlen(suffix)), suffix};
  return {s, ""};
}

// The GGUF tensor for HF tensor `hf`, nullopt for tensors llama.cpp does not use.
std::optional<Mapping> map_tensor(const std::string& hf, const ModelConfig& c, const std::string& arch) {
  const TensorLayout& layout = tensor_layout(c);
  const auto named = [](ModuleName m, std::string_view suffix) {
    return std::string(m.hf) + std::string(suffix);
  };
  const auto gguf = [](ModuleName m, std::string_view suffix) {
    return std::string(m.gguf) + std::string(suffix);
  };
  if (hf == named(layout.lm_head, ".weight")) {
    if (c.tie_word_embeddings) return std::nullopt;
    return Mapping{gguf(layout.lm_head, ".weight")};
  }
  // Outside a required prefix: another part of the checkpoint (a vision tower, which
  // llama.cpp keeps in a separate mmproj file).
  if (layout.hf_prefix_required && !hf.starts_with(layout.hf_prefix)) return std::nullopt;
  const std::string base =
      !layout.hf_prefix.empty() && hf.starts_with(layout.hf_prefix) ? hf.substr(layout.hf_prefix.size()) : hf;
  const auto norm_transform = [&](bool norm) {
    return norm && c.norm_weight_offset ? Transform::AddOne : Transform::None;
  };
  for (const ModuleName m : {layout.token_embedding, layout.position_embedding, layout.final_norm})
    for (const std::string_view suffix : {".weight", ".bias"})
      if (m.present() && base == named(m, suffix))
        return Mapping{gguf(m, suffix), norm_transform(m.hf == layout.final_norm.hf)};
  const std::string_view layer_prefix = layout.layer.hf.substr(0, layout.layer.hf.find("{}"));
  if (const auto layer = split_layer(base, std::string(layer_prefix))) {
    const auto& [index, rest] = *layer;
    if (index >= c.num_hidden_layers)
      fail("tensor {}: layer {} is beyond num_hidden_layers {}", hf, index, c.num_hidden_layers);
    if (rest.ends_with("rotary_emb.inv_freq") || rest == "attn.bias" || rest == "attn.masked_bias")
      return std::nullopt;
    if (layout.attn_sinks.present() && rest == layout.attn_sinks.hf)  // a parameter, named whole
      return Mapping{layer_module_name(layout, WeightFormat::Gguf, index, layout.attn_sinks) + ".weight"};
    if (!layout.hf_fused_experts.empty() && rest.starts_with(std::string(layout.hf_fused_experts) + "."))
      return std::nullopt;  // fused_expert_tensors writes them, a layer at a time
    const auto [module, suffix] = split_suffix(rest);
    for (const ModuleName m : {layout.expert_gate, layout.expert_up, layout.expert_down}) {
      const auto expert = m.present() && suffix == ".weight" ? expert_index(module, m.hf) : std::nullopt;
      if (!expert) continue;
      if (*expert >= c.num_experts)
        fail("tensor {}: expert {} is beyond the {} experts of config.json", hf, *expert, c.num_experts);
      return Mapping{.name = layer_module_name(layout, WeightFormat::Gguf, index, m) + suffix,
                     .expert = *expert};
    }
    for (const TensorLayout::LayerModule& lm : layout.layer_modules()) {
      if (!lm.name.present() || module != lm.name.hf || suffix.empty()) continue;
      Mapping m{layer_module_name(layout, WeightFormat::Gguf, index, lm.name) + suffix,
                norm_transform(!lm.linear)};
      if (layout.hf_transposed_linears && lm.linear && suffix == ".weight")
        m.transform = Transform::Transpose;
      // llama.cpp's "llama" rope rotates adjacent pairs: q and k rows are permuted to match.
      if (arch == "llama" && (module == layout.q.hf || module == layout.k.hf)) {
        m.transform = Transform::PermuteHeads;
        m.heads = module == layout.q.hf ? c.num_attention_heads : c.num_key_value_heads;
      }
      return m;
    }
  }
  fail("tensor {}: not a tensor of a {} model that tokenmill knows how to convert", hf, c.architecture);
}

SourceTensor source_tensor(const StoredTensor& stored, const Mapping& m) {
  const SafetensorsEntry& e = *stored.entry;
  if (!e.dtype)
    fail("{}: tensor {} has dtype {}; convert reads F32, F16 and BF16 tensors", stored.file->string(), e.name,
         e.dtype_name);
  if (e.shape.size() > 2 && m.transform != Transform::None)
    fail("{}: tensor {} has {} dimensions, expected 1 or 2", stored.file->string(), e.name, e.shape.size());
  if (e.shape.size() > kMaxGgufDims)
    fail("{}: tensor {} has {} dimensions (GGUF allows {})", stored.file->string(), e.name, e.shape.size(),
         kMaxGgufDims);
  SourceTensor t;
  t.name = m.name;
  t.shape.assign(e.shape.rbegin(), e.shape.rend());
  if (t.shape.empty()) t.shape = {1};
  t.ggml_type = quant::ggml_type_of(*e.dtype);
  t.nbytes = e.nbytes;
  const DType dtype = *e.dtype;
  const std::byte* data = stored.data;
  const int64_t cols = t.shape[0];
  if (m.transform == Transform::None) {
    t.raw = {data, static_cast<size_t>(e.nbytes)};
    t.read_row = [=](int64_t row, float* out) {
      for (int64_t j = 0; j < cols; ++j)
        out[j] = load_as_f32(data, dtype, static_cast<size_t>(row * cols + j));
    };
  } else if (m.transform == Transform::AddOne) {
    t.read_row = [=](int64_t row, float* out) {
      for (int64_t j = 0; j < cols; ++j)
        out[j] = load_as_f32(data, dtype, static_cast<size_t>(row * cols + j)) + 1.0f;
    };
  } else if (m.transform == Transform::Transpose) {
    // HF Conv1D [in, out] -> ggml {in, out}: row o holds column o of the stored matrix.
    if (e.shape.size() != 2) fail("{}: tensor {} should be a matrix", stored.file->string(), e.name);
    std::swap(t.shape[0], t.shape[1]);
    const int64_t in = e.shape[0], out_dim = e.shape[1];
    t.read_row = [=](int64_t row, float* out) {
      for (int64_t i = 0; i < in; ++i)
        out[i] = load_as_f32(data, dtype, static_cast<size_t>(i * out_dim + row));
    };
  } else {
    const int64_t rows = e.shape[0];
    if (m.heads <= 0 || rows % (2 * m.heads) != 0)
      fail("{}: tensor {} has {} rows, not a multiple of 2 x {} heads", stored.file->string(), e.name, rows,
           m.heads);
    const int64_t head_rows = rows / m.heads;
    if (e.shape.size() == 1) {  // a bias: one row of `rows` values
      t.read_row = [=](int64_t, float* out) {
        for (int64_t j = 0; j < rows; ++j)
          out[j] = load_as_f32(data, dtype, static_cast<size_t>(interleaved_source_row(j, head_rows)));
      };
    } else {
      t.read_row = [=](int64_t row, float* out) {
        const int64_t src = interleaved_source_row(row, head_rows);
        for (int64_t j = 0; j < cols; ++j)
          out[j] = load_as_f32(data, dtype, static_cast<size_t>(src * cols + j));
      };
    }
  }
  return t;
}

// One GGUF tensor of a layer's experts, ne = [cols, rows, experts], from the Hugging Face
// matrix of each expert (`parts`, by expert index), which must all be there, with one shape
// and one dtype.
SourceTensor stacked_experts(const std::string& name, const std::vector<std::optional<StoredTensor>>& parts,
                             int64_t experts) {
  for (size_t e = 0; e < parts.size(); ++e)
    if (!parts[e]) fail("{}: the checkpoint lacks expert {}'s matrix (of {} experts)", name, e, experts);
  const SafetensorsEntry& first = *parts.front()->entry;
  for (const std::optional<StoredTensor>& p : parts) {
    const SafetensorsEntry& e = *p->entry;
    if (e.shape != first.shape || e.dtype != first.dtype || e.shape.size() != 2)
      fail("{}: tensor {} is not a matrix of the shape and dtype of {}", p->file->string(), e.name,
           first.name);
  }
  SourceTensor t = source_tensor(*parts.front(), Mapping{name});
  const int64_t rows = first.shape[0], cols = first.shape[1];
  t.shape = {cols, rows, experts};
  t.nbytes = first.nbytes * static_cast<uint64_t>(experts);
  t.raw = {};
  std::vector<std::function<void(int64_t, float*)>> readers;
  for (const std::optional<StoredTensor>& p : parts)
    readers.push_back(source_tensor(*p, Mapping{name}).read_row);
  t.read_row = [readers = std::move(readers), rows](int64_t row, float* out) {
    readers[static_cast<size_t>(row / rows)](row % rows, out);
  };
  return t;
}

// A tensor the conversion holds in memory (kept alive with the source), ne `shape`.
SourceTensor memory_tensor(std::string name, const Tensor& t, std::vector<int64_t> shape) {
  SourceTensor s{std::move(name), std::move(shape), quant::ggml_type_of(t.dtype), t.nbytes(), {}, {}};
  s.raw = {static_cast<const std::byte*>(t.data), static_cast<size_t>(t.nbytes())};
  s.read_row = stored_row_reader(t.dtype, s.shape[0], s.raw.data());
  return s;
}

// gpt-oss's fused experts of layer `layer` (model/fused_experts.h, read into `store`) as
// convert_hf_to_gguf.py writes them: ffn_{gate,up}_exps ne [H, I, E], ffn_down_exps ne
// [I, H, E], their biases ne [I, E] and [H, E], in their stored type (MXFP4 stays MXFP4).
std::vector<SourceTensor> fused_expert_tensors(const SafetensorsArchive& archive, TensorStore& store,
                                               const ModelConfig& c, int64_t layer) {
  const TensorLayout& layout = tensor_layout(c);
  const int64_t experts = c.num_experts, width = c.expert_intermediate_size, hidden = c.hidden_size;
  const ExpertStacks s = read_fused_experts(
      archive, store,
      layer_module_name(layout, WeightFormat::HuggingFace, layer, {layout.hf_fused_experts, {}}), experts,
      width, hidden);
  const auto name = [&](ModuleName m, const char* suffix) {
    return layer_module_name(layout, WeightFormat::Gguf, layer, m) + suffix;
  };
  return {memory_tensor(name(layout.expert_gate, ".weight"), s.gate, {hidden, width, experts}),
          memory_tensor(name(layout.expert_gate, ".bias"), s.gate_bias, {width, experts}),
          memory_tensor(name(layout.expert_up, ".weight"), s.up, {hidden, width, experts}),
          memory_tensor(name(layout.expert_up, ".bias"), s.up_bias, {width, experts}),
          memory_tensor(name(layout.expert_down, ".weight"), s.down, {width, hidden, experts}),
          memory_tensor(name(layout.expert_down, ".bias"), s.down_bias, {hidden, experts})};
}

// convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors: per-frequency llama3 factors,
// in float32 as its torch arithmetic (each python number taken as a float32 operand).
std::vector<float> llama3_rope_factors(const ModelConfig& c) {
  const RopeScaling& s = c.rope_scaling;
  const auto old_context = static_cast<float>(s.original_max_position_embeddings);
  const double low_wavelen = static_cast<double>(old_context) / s.low_freq_factor;
  const double high_wavelen = static_cast<double>(old_context) / s.high_freq_factor;
  std::vector<float> factors;
  for (int64_t i = 0; i < c.rotary_dim; i += 2) {
    const float freq = 1.0f / std::pow(static_cast<float>(c.rope_theta),
                                       static_cast<float>(i) / static_cast<float>(c.rotary_dim));
    const float wavelen = static_cast<float>(2 * std::numbers::pi) / freq;
    float f = 1.0f;
    if (wavelen > low_wavelen) {
      f = static_cast<float>(s.factor);
    } else if (wavelen >= high_wavelen) {
      const float smooth = (old_context / wavelen - static_cast<float>(s.low_freq_factor)) /
                           static_cast<float>(s.high_freq_factor - s.low_freq_factor);
      f = 1.0f / ((1.0f - smooth) / static_cast<float>(s.factor) + smooth);
    }
    factors.push_back(f);
  }
  return factors;
}

// llama.cpp stores none of a Gemma's GemmaGgufRules fields and derives them (as
// model/gguf_model.cpp does): a config that differs would load as another model.
void check_gemma_derivable(const ModelConfig& c, const GemmaGgufRules& rules) {
  const auto refuse = [&](std::string_view what) {
    fail("config.json: {}; llama.cpp's {} files cannot say so (it derives this), so it is not converted",
         what, c.architecture);
  };
  if (c.sliding_window > 0) {
    for (int64_t l = 0; l < c.num_hidden_layers; ++l)
      if (c.sliding_layer(l) != ((l + 1) % rules.sliding_pattern != 0))
        refuse(fmt::format("the sliding layers are not all but every {}th", rules.sliding_pattern));
    if (c.sliding_rope_theta != rules.sliding_rope_theta)
      refuse(fmt::format("the sliding layers' RoPE base is not {}", rules.sliding_rope_theta));
  }
  const int64_t scalar =
      gemma_gguf_query_scalar(rules, c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.head_dim);
  if (c.query_pre_attn_scalar != static_cast<double>(scalar))
    refuse(fmt::format("query_pre_attn_scalar is not {}", scalar));
}

void set_hyperparameters(GgufWriter& w, const ModelConfig& c, const std::string& arch) {
  auto key = [&](std::string_view name) { return fmt::format("{}.{}", arch, name); };
  auto u32 = [&](std::string_view name, int64_t v) {
    if (v < 0 || v > UINT32_MAX) fail("config.json: {} = {} does not fit in a u32", name, v);
    w.set_u32(key(name), static_cast<uint32_t>(v));
  };
  u32("context_length", c.max_position_embeddings);
  u32("embedding_length", c.hidden_size);
  u32("feed_forward_length", c.intermediate_size);
  u32("block_count", c.num_hidden_layers);
  u32("attention.head_count", c.num_attention_heads);
  u32("vocab_size", c.vocab_size);
  if (arch == "gpt2") {
    w.set_f32(key("attention.layer_norm_epsilon"), static_cast<float>(c.norm_eps));
    return;
  }
  u32("attention.head_count_kv", c.num_key_value_heads);
  u32("attention.key_length", c.head_dim);
  u32("attention.value_length", c.head_dim);
  w.set_f32(key("attention.layer_norm_rms_epsilon"), static_cast<float>(c.norm_eps));
  w.set_f32(key("rope.freq_base"), static_cast<float>(c.rope_theta));
  u32("rope.dimension_count", c.rotary_dim);
  // llama.cpp's "llama" files hold q and k permuted for adjacent pairs over the whole head.
  if (arch == "llama" && c.rotary_dim != c.head_dim)
    fail(
        "config.json: RoPE rotates {} of each head's {} elements, which llama.cpp's {} files cannot say; "
        "not converted",
        c.rotary_dim, c.head_dim, arch);
  // llama.cpp runs Phi-3's and Gemma's windows, not Mistral's ("llama"): there the key is
  // for tokenmill, which runs the window as transformers does.
  if (c.sliding_window > 0) u32("attention.sliding_window", c.sliding_window);
  if (const auto rules = gemma_gguf_rules(arch)) {
    check_gemma_derivable(c, *rules);
    if (c.attn_logit_softcapping > 0)
      w.set_f32(key("attn_logit_softcapping"), static_cast<float>(c.attn_logit_softcapping));
    if (c.final_logit_softcapping > 0)
      w.set_f32(key("final_logit_softcapping"), static_cast<float>(c.final_logit_softcapping));
  }
  if (c.mixture_of_experts()) {
    u32("expert_count", c.num_experts);
    u32("expert_used_count", c.experts_per_token);
    if (c.expert_intermediate_size != c.intermediate_size || c.swiglu_limit > 0)  // gpt-oss's is required
      u32("expert_feed_forward_length", c.expert_intermediate_size);
    w.set_bool(key("expert_weights_norm"), c.normalize_expert_weights);
  }
  // llama.cpp runs gpt-oss's SwiGLU with these constants, which its files cannot change.
  if (c.swiglu_limit > 0 && (c.swiglu_limit != 7.0 || c.swiglu_alpha != 1.702))
    fail(
        "config.json: swiglu_limit {} and swiglu_alpha {} are not gpt-oss's 7 and 1.702, which llama.cpp's "
        "files cannot say otherwise; not converted",
        c.swiglu_limit, c.swiglu_alpha);
  const RopeScaling& rope = c.rope_scaling;
  if (rope.rope_type == "linear" || rope.rope_type == "yarn") {
    w.set_string(key("rope.scaling.type"), rope.rope_type);
    w.set_f32(key("rope.scaling.factor"), static_cast<float>(rope.factor));
  }
  // YaRN as convert_hf_to_gguf.py writes it (llama.cpp always truncates the ramp's bounds).
  if (rope.rope_type == "yarn") {
    u32("rope.scaling.original_context_length", rope.original_max_position_embeddings);
    w.set_f32(key("rope.scaling.yarn_beta_fast"), static_cast<float>(rope.beta_fast));
    w.set_f32(key("rope.scaling.yarn_beta_slow"), static_cast<float>(rope.beta_slow));
  }
  // LongRoPE as convert_hf_to_gguf.py writes Phi-3's (its factor lists are tensors, rope_factors):
  // the original context, and the attention factor (llama.cpp's phi3 applies it as transformers).
  if (rope.rope_type == "longrope") {
    if (arch != "phi3")
      fail("config.json: LongRoPE in a {} model, which llama.cpp's files hold only for phi3; not converted",
           c.architecture);
    u32("rope.scaling.original_context_length", rope.original_max_position_embeddings);
    w.set_f32(key("rope.scaling.attn_factor"), static_cast<float>(rope.attention_factor));
  }
}

// Sort key: embeddings first, then layer by layer, then the output tensors.
int64_t tensor_order(const std::string& name) {
  if (const auto layer = split_layer(name, "blk.")) return 1 + layer->first;
  return name.starts_with("output") ? INT64_MAX : 0;
}

// A 1-D f32 tensor of `values`, which must outlive it.
SourceTensor vector_tensor(std::string name, const std::vector<float>& values) {
  SourceTensor t{std::move(name), {std::ssize(values)}, 0, values.size() * 4, {}, {}};
  t.raw = std::as_bytes(std::span<const float>(values));
  t.read_row = [&values](int64_t, float* out) { std::memcpy(out, values.data(), values.size() * 4); };
  return t;
}

struct HfFiles {
  SafetensorsArchive archive;
  std::vector<float> rope_factors;                 // llama 3's rope_freqs
  std::vector<float> long_factors, short_factors;  // LongRoPE's
  TensorStore fused_experts{host_memory()};        // gpt-oss's experts, rearranged (fused_expert_tensors)
};

}  // namespace

ModelSource hf_model_source(const std::filesystem::path& dir, const LogFn& log) {
  const ModelConfig config = load_model_config(dir);
  const std::string arch(architecture_of(config).gguf_arch);  // Mistral files are "llama"
  auto files = std::make_shared<HfFiles>(HfFiles{SafetensorsArchive::open(dir), {}, {}, {}});
  ModelSource source;
  GgufWriter& w = source.metadata;
  w.set_string("general.architecture", arch);
  w.set_string("general.type", "model");
  const std::filesystem::path absolute = std::filesystem::absolute(dir).lexically_normal();
  const std::string name = (absolute.has_filename() ? absolute : absolute.parent_path()).filename().string();
  if (!name.empty()) w.set_string("general.name", name);
  set_hyperparameters(w, config, arch);

  if (arch == "llama" && config.rope_scaling.rope_type == "llama3") {
    files->rope_factors = llama3_rope_factors(config);
    source.tensors.push_back(vector_tensor("rope_freqs.weight", files->rope_factors));
  }
  if (config.rope_scaling.rope_type == "longrope") {
    files->long_factors = config.rope_scaling.long_factor;
    files->short_factors = config.rope_scaling.short_factor;
    source.tensors.push_back(vector_tensor("rope_factors_long.weight", files->long_factors));
    source.tensors.push_back(vector_tensor("rope_factors_short.weight", files->short_factors));
  }
  std::map<std::string, std::vector<std::optional<StoredTensor>>> expert_parts;  // stacked name -> by expert
  for (const std::string& hf : files->archive.names()) {
    const auto mapping = map_tensor(hf, config, arch);
    if (!mapping) continue;
    if (mapping->expert >= 0) {
      auto& parts = expert_parts[mapping->name];
      parts.resize(static_cast<size_t>(config.num_experts));
      parts[static_cast<size_t>(mapping->expert)] = files->archive.find(hf);
      continue;
    }
    source.tensors.push_back(source_tensor(*files->archive.find(hf), *mapping));
  }
  const TensorLayout& layout = tensor_layout(config);
  const bool fused = !layout.hf_fused_experts.empty();
  for (int64_t l = 0; l < (fused ? config.num_hidden_layers : 0); ++l)
    for (SourceTensor& t : fused_expert_tensors(files->archive, files->fused_experts, config, l))
      source.tensors.push_back(std::move(t));
  for (int64_t l = 0; l < (config.mixture_of_experts() && !fused ? config.num_hidden_layers : 0); ++l)
    for (const ModuleName m : {layout.expert_gate, layout.expert_up, layout.expert_down}) {
      const std::string stacked = layer_module_name(layout, WeightFormat::Gguf, l, m) + ".weight";
      const auto parts = expert_parts.find(stacked);
      source.tensors.push_back(stacked_experts(
          stacked,
          parts != expert_parts.end() ? parts->second
                                      : std::vector<std::optional<StoredTensor>>(config.num_experts),
          config.num_experts));
    }
  // Layer order (blk.2 before blk.10), as convert_hf_to_gguf.py writes them.
  std::stable_sort(source.tensors.begin(), source.tensors.end(),
                   [](const SourceTensor& a, const SourceTensor& b) {
                     return tensor_order(a.name) < tensor_order(b.name);
                   });

  std::error_code ec;
  if (std::filesystem::exists(dir / "tokenizer.json", ec)) {
    set_tokenizer_metadata(w, read_model_dir_tokenizer(dir), config.vocab_size, log);
  } else {
    if (log) log(fmt::format("{}: no tokenizer.json; writing a model without a vocabulary", dir.string()));
    w.set_string("tokenizer.ggml.model", "none");
  }
  source.keep_alive = files;
  return source;
}

GgufWriteReport convert_hf_to_gguf(const std::filesystem::path& dir, const std::filesystem::path& out,
                                   const GgufWriteOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    fail(
        "{}: not a directory (convert reads a Hugging Face model directory: config.json, *.safetensors, "
        "tokenizer.json)",
        dir.string());
  check_distinct_output(dir, out);
  return write_model_gguf(hf_model_source(dir, options.log), out, options);
}

}  // namespace tokenmill
