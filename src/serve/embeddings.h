// POST /v1/embeddings for decoder models. An input's embedding is the final hidden state
// (after the final norm) of its last token ("last-token" pooling, as Qwen3-Embedding and
// e5-mistral pool), L2-normalised as the model's sentence-transformers config says
// (EmbeddingPooling), computed by the engine: the inputs of a request, and of concurrent
// requests, share its batched steps and its prefix cache.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/engine.h"
#include "serve/openai_request.h"

namespace tokenmill {

// The pooling of the model at `model_path`: a directory's sentence-transformers config
// (modules.json naming a Pooling module whose config.json sets pooling_mode_*, and whether a
// Normalize module follows), else last-token and normalised (also for GGUF files). Errors
// name a config file that cannot be read as JSON.
EmbeddingPooling read_embedding_pooling(const std::filesystem::path& model_path);

// Runs every input on the engine and answers OpenAI's {object: "list", data: [{object:
// "embedding", index, embedding}], model, usage}. Throws what Engine::submit throws, and
// Error when the model's pooling is unsupported or the engine ends an input early (the
// server stopping, the request timing out after `timeout`).
nlohmann::json run_embeddings(Engine& engine, const ServedModel& model, const EmbeddingRequest& request,
                              std::chrono::seconds timeout);

}  // namespace tokenmill
