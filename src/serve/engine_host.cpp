#include "serve/engine_host.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "model/paged_transformer.h"
#include "model/weight_placement.h"

namespace tokenmill {

namespace {

std::string served_name(const EngineHostConfig& config) {
  if (!config.served_model_name.empty()) return config.served_model_name;
  const std::filesystem::path p = config.model.has_filename() ? config.model : config.model.parent_path();
  return p.extension() == ".gguf" ? p.stem().string() : p.filename().string();
}

std::string read_chat_template(const std::filesystem::path& file, const std::optional<Tokenizer>& tokenizer) {
  if (file.empty()) return tokenizer ? tokenizer->chat_template() : std::string();
  std::ifstream in(file, std::ios::binary);
  if (!in) fail("--chat-template {}: cannot read the file", file.string());
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

uint64_t kv_cache_budget(const EngineHostConfig& config, const Model& model, uint64_t available_memory) {
  if (config.engine.kv_cache_bytes > 0) return config.engine.kv_cache_bytes;
  if (!(config.kv_cache_fraction > 0.0 && config.kv_cache_fraction <= 1.0))
    fail("--kv-cache-fraction {} must be in (0, 1]", config.kv_cache_fraction);
  const ModelConfig& c = model.config;
  const int64_t context =
      config.engine.context > 0 ? std::min(config.engine.context, c.context_length()) : c.context_length();
  const uint64_t per_token = PagedTransformer::block_bytes(c, 1, model.default_kv_dtype());
  const int64_t held =
      kv_positions_per_sequence(c, context, config.engine.max_batch_tokens, config.engine.block_size);
  const auto wanted =
      static_cast<uint64_t>(config.engine.max_running) * static_cast<uint64_t>(held) * per_token;
  return std::min(wanted,
                  static_cast<uint64_t>(config.kv_cache_fraction * static_cast<double>(available_memory)));
}

EngineHost::EngineHost(EngineHostConfig config, EngineObserver* observer, const LogFn& log)
    : config_(std::move(config)), model_(TextModel::load(config_.model)) {
  if (config_.require_tokenizer) model_.require_tokenizer("serving");
  device_ = choose_device(config_.device, *model_.model, config_.host_weights);
  if (!device_.note.empty()) log(device_.note);
  EngineOptions& engine = config_.engine;
  if (engine.kv_cache_bytes == 0)
    engine.kv_cache_bytes = kv_cache_budget(config_, *model_.model, backend().memory().available());
  if (!config_.draft_model.empty()) {
    draft_ = TextModel::load(config_.draft_model);
    place_weights(draft_->model->weights, backend().memory());
    engine.draft_model = &*draft_;
  }
  name_ = served_name(config_);
  adapters_ = load_lora_adapters(model_.model->config, config_.lora_adapters, name_, backend().memory());
  for (size_t i = 0; i < adapters_.size(); ++i) {
    const LoraAdapterSpec& spec = config_.lora_adapters[i];
    engine.adapters.push_back(&adapters_[i]->weights);
    adapter_names_.push_back(spec.name);
    log(fmt::format("LoRA adapter {} from {} (made for {}): rank up to {}, {:.1f} MiB", spec.name,
                    spec.dir.string(),
                    adapters_[i]->base_model.empty() ? "an unnamed base model" : adapters_[i]->base_model,
                    adapters_[i]->max_rank, static_cast<double>(adapters_[i]->store.bytes()) / (1 << 20)));
  }
  chat_template_source_ = read_chat_template(config_.chat_template_file, model_.tokenizer);
  if (!chat_template_source_.empty()) chat_template_.emplace(chat_template_source_);
  engine_ = std::make_unique<Engine>(model_, backend(), engine, observer);
  if (draft_)
    log(
        fmt::format("speculative decoding: up to {} tokens a step guessed by the draft model {} (its KV "
                    "pool: {:.1f} MiB)",
                    engine.speculative.max_tokens, config_.draft_model.string(),
                    static_cast<double>(engine_->draft_pool_bytes()) / (1 << 20)));
  const Engine::Capacity& kv = engine_->capacity();
  log(fmt::format(
      "KV cache on {}: {} blocks of {} tokens = {} tokens ({:.1f} MiB, {}); {} sequences of the full "
      "{}-token "
      "context fit at once",
      backend().name(), kv.blocks, kv.block_size, kv.tokens, static_cast<double>(kv.bytes) / (1 << 20),
      dtype_name(model_.model->default_kv_dtype()), kv.full_context_sequences, engine_->context()));
}

EngineHost::~EngineHost() { engine_->shutdown(std::chrono::milliseconds(0)); }

}  // namespace tokenmill
