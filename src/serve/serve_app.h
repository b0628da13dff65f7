// run_server(): `tokenmill serve` as a library call. Loads the model onto the chosen device
// (its weights and KV cache in the device's memory; sampling stays on the host), sizes the
// KV cache, starts the engine and the HTTP server, logs what fits, serves until SIGINT or
// SIGTERM, then shuts down gracefully: no new connections or requests (503), requests in
// flight finish within the grace period or are cut (finish_reason "abort"), and it returns.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>

#include "model/model.h"
#include "model/weight_placement.h"
#include "serve/engine.h"
#include "serve/http_server.h"
#include "serve/lora_adapters.h"
#include "serve/openai_request.h"

namespace tokenmill {

struct ServeConfig {
  std::filesystem::path model;
  std::filesystem::path draft_model;  // speculative guesses from it (engine.speculative.max_tokens of them)
  std::string served_model_name;      // "": the model directory's name, or the file's without .gguf
  std::vector<LoraAdapterSpec> lora_adapters;  // served beside the model, each by its name
  std::filesystem::path chat_template_file;    // "": the tokenizer's own template
  std::string device = "auto";  // where the model and its KV cache live (runtime/device_choice.h)
  HostWeights host_weights = HostWeights::Mapped;  // on the CPU (model/weight_placement.h)
  EngineOptions engine;  // engine.kv_cache_bytes 0: kv_cache_fraction of the device's free memory
  double kv_cache_fraction = 0.2;
  HttpServerOptions http;
  ServeLimits limits;
  std::chrono::seconds shutdown_grace{30};
};

// KV bytes for `config`: the bytes asked for, or the fraction of available memory, but no
// more than max_running sequences of the full context hold at once (kv_positions_per_sequence).
uint64_t kv_cache_budget(const ServeConfig& config, const Model& model, uint64_t available_memory);

void run_server(ServeConfig config);

}  // namespace tokenmill
