#include "serve/serve_app.h"

#include <pthread.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <iterator>
#include <optional>
#include <thread>

#include "backend/backend.h"
#include "model/paged_transformer.h"
#include "model/weight_placement.h"
#include "runtime/device_choice.h"
#include "runtime/text_model.h"
#include "serve/embeddings.h"
#include "serve/server_metrics.h"

namespace tokenmill {

namespace {

std::string served_name(const ServeConfig& config) {
  if (!config.served_model_name.empty()) return config.served_model_name;
  const std::filesystem::path p = config.model.has_filename() ? config.model : config.model.parent_path();
  return p.extension() == ".gguf" ? p.stem().string() : p.filename().string();
}

// Blocks SIGINT and SIGTERM in this thread and every thread it starts later, so that
// sigwait() in the main thread is the only place they arrive.
sigset_t block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not a signal
  return set;
}

}  // namespace

uint64_t kv_cache_budget(const ServeConfig& config, const Model& model, uint64_t available_memory) {
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

void run_server(ServeConfig config) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("serve"));  // stdout stays free for tools
  const sigset_t stop_signals = block_stop_signals();
  const TextModel model = TextModel::load(config.model);
  const Tokenizer& tokenizer = model.require_tokenizer("serving");
  const DeviceChoice device = choose_device(config.device, *model.model, config.host_weights);
  if (!device.note.empty()) spdlog::info("{}", device.note);
  Backend& backend = *device.backend;
  if (config.engine.kv_cache_bytes == 0)
    config.engine.kv_cache_bytes = kv_cache_budget(config, *model.model, backend.memory().available());
  std::optional<TextModel> draft;
  if (!config.draft_model.empty()) {
    draft = TextModel::load(config.draft_model);
    place_weights(draft->model->weights, backend.memory());
    config.engine.draft_model = &*draft;
  }
  const std::string name = served_name(config);
  const std::vector<std::unique_ptr<LoraAdapter>> adapters =
      load_lora_adapters(model.model->config, config.lora_adapters, name, backend.memory());
  for (size_t i = 0; i < adapters.size(); ++i) {
    config.engine.adapters.push_back(&adapters[i]->weights);
    spdlog::info("LoRA adapter {} from {} (made for {}): rank up to {}, {:.1f} MiB",
                 config.lora_adapters[i].name, config.lora_adapters[i].dir.string(),
                 adapters[i]->base_model.empty() ? "an unnamed base model" : adapters[i]->base_model,
                 adapters[i]->max_rank, static_cast<double>(adapters[i]->store.bytes()) / (1 << 20));
  }
  ServerMetrics metrics;
  Engine engine(model, backend, config.engine, &metrics);
  const Engine::Capacity& kv = engine.capacity();
  if (draft)
    spdlog::info(
        "speculative decoding: up to {} tokens a step guessed by the draft model {} (its KV pool: {:.1f} "
        "MiB)",
        config.engine.speculative.max_tokens, config.draft_model.string(),
        static_cast<double>(engine.draft_pool_bytes()) / (1 << 20));
  spdlog::info(
      "KV cache on {}: {} blocks of {} tokens = {} tokens ({:.1f} MiB, {}); {} sequences of the full "
      "{}-token context fit at once",
      backend.name(), kv.blocks, kv.block_size, kv.tokens, static_cast<double>(kv.bytes) / (1 << 20),
      dtype_name(model.model->default_kv_dtype()), kv.full_context_sequences, engine.context());

  ServedModel served{name, tokenizer, std::nullopt, engine.context(), std::time(nullptr), config.limits};
  for (const LoraAdapterSpec& spec : config.lora_adapters) served.adapters.push_back(spec.name);
  std::string chat_template_source = tokenizer.chat_template();
  if (!config.chat_template_file.empty()) {
    std::ifstream in(config.chat_template_file, std::ios::binary);
    if (!in) fail("--chat-template {}: cannot read the file", config.chat_template_file.string());
    chat_template_source.assign(std::istreambuf_iterator<char>(in), {});
  }
  if (!chat_template_source.empty()) served.chat_template.emplace(chat_template_source);
  served.grammars = std::make_shared<GrammarCache>(tokenizer);
  served.tool_format = detect_tool_format(chat_template_source);
  served.hidden_size = model.model->config.hidden_size;
  served.pooling = read_embedding_pooling(model.model->path);
  HttpServer server(engine, served, metrics, config.http);
  const int port = server.bind();
  spdlog::info("serving {} on http://{}:{} (backend {}, {} API key{})", served.id, config.http.host, port,
               backend.name(), config.http.api_keys.size(), config.http.api_keys.size() == 1 ? "" : "s");
  std::thread http([&server] { server.serve(); });

  int signal = 0;
  sigwait(&stop_signals, &signal);
  spdlog::info("{}: stopping (grace period {} s)", signal == SIGINT ? "SIGINT" : "SIGTERM",
               config.shutdown_grace.count());
  std::thread drain([&] { engine.shutdown(config.shutdown_grace); });
  server.stop();
  http.join();
  drain.join();
  spdlog::info("stopped");
}

}  // namespace tokenmill
