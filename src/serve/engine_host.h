// EngineHost: a model loaded for serving and the engine running over it: the model with its
// tokenizer, its weights and KV cache on the chosen device, the draft model of speculative
// decoding, the LoRA adapters, the chat template, and the Engine. `tokenmill serve` puts an
// HTTP server in front of it (serve/serve_app.h); the Python package's LLM calls it directly.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/log_fn.h"
#include "model/peft_adapter.h"
#include "model/weight_placement.h"
#include "runtime/device_choice.h"
#include "runtime/text_model.h"
#include "serve/engine.h"
#include "serve/lora_adapters.h"
#include "tokenizer/chat_template.h"

namespace tokenmill {

struct EngineHostConfig {
  std::filesystem::path model;
  std::filesystem::path draft_model;  // speculative guesses from it (engine.speculative.max_tokens of them)
  std::string served_model_name;      // "": the model directory's name, or the file's without .gguf
  std::vector<LoraAdapterSpec> lora_adapters;  // served beside the model, each by its name
  std::filesystem::path chat_template_file;    // "": the tokenizer's own template
  std::string device = "auto";  // where the model and its KV cache live (runtime/device_choice.h)
  HostWeights host_weights = HostWeights::Mapped;  // on the CPU (model/weight_placement.h)
  EngineOptions engine;  // engine.kv_cache_bytes 0: kv_cache_fraction of the device's free memory
  double kv_cache_fraction = 0.2;
  // Refuse a model without a tokenizer right after reading it (`serve` needs one: text in,
  // text out); else such a model is served token ids in, token ids out.
  bool require_tokenizer = false;
};

// KV bytes for `config`: the bytes asked for, or the fraction of available memory, but no
// more than max_running sequences of the full context hold at once (kv_positions_per_sequence).
uint64_t kv_cache_budget(const EngineHostConfig& config, const Model& model, uint64_t available_memory);

class EngineHost {
 public:
  // Loads config.model onto config.device (weights and a KV pool of
  // kv_cache_budget(config, ...) bytes), config.draft_model and config.lora_adapters beside it,
  // reads the chat template (config.chat_template_file, else the tokenizer's), and starts the
  // engine. `log` gets one line for each choice made (a device fallback, each adapter, the KV
  // cache's size). `observer`, if any, must outlive the host. Throws Error when anything fails
  // to load (the message names the file or flag), or the model has no tokenizer and
  // config.require_tokenizer. A model without a tokenizer is served token ids in, token ids
  // out (Engine), with no chat template unless config.chat_template_file.
  EngineHost(EngineHostConfig config, EngineObserver* observer, const LogFn& log);
  ~EngineHost();  // shuts the engine down at once (requests in flight end with Shutdown)

  EngineHost(const EngineHost&) = delete;
  EngineHost& operator=(const EngineHost&) = delete;

  const TextModel& model() const { return model_; }
  Backend& backend() const { return *device_.backend; }
  Engine& engine() const { return *engine_; }
  // The model's name: config.served_model_name, else the directory's name or the file's
  // without .gguf.
  const std::string& name() const { return name_; }
  // The adapters' names, in the order of EngineRequest::adapter.
  const std::vector<std::string>& adapter_names() const { return adapter_names_; }
  // The chat template's source ("" when there is none) and the parsed template.
  const std::string& chat_template_source() const { return chat_template_source_; }
  const std::optional<ChatTemplate>& chat_template() const { return chat_template_; }
  const EngineHostConfig& config() const { return config_; }

 private:
  EngineHostConfig config_;
  TextModel model_;
  DeviceChoice device_;
  std::optional<TextModel> draft_;
  std::vector<std::unique_ptr<LoraAdapter>> adapters_;
  std::vector<std::string> adapter_names_;
  std::string name_;
  std::string chat_template_source_;
  std::optional<ChatTemplate> chat_template_;
  std::unique_ptr<Engine> engine_;  // last: it runs over everything above
};

}  // namespace tokenmill
