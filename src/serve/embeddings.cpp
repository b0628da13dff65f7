#include "serve/embeddings.h"

#include <openssl/evp.h>

#include <cmath>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_file.h"
#include "serve/api_error.h"

namespace tokenmill {

namespace {

// The pooling_mode_* the Pooling module's config sets (the first true one), "" when none.
std::string pooling_mode(const nlohmann::json& config) {
  for (const auto& [key, value] : config.items())
    if (key.starts_with("pooling_mode_") && value.is_boolean() && value.get<bool>())
      return key.substr(std::strlen("pooling_mode_"));
  return "";
}

// Little-endian f32 bytes, base64 (what the openai client decodes for encoding_format base64).
std::string base64_floats(const std::vector<float>& values) {
  const auto bytes = static_cast<int>(values.size() * sizeof(float));
  std::string out(static_cast<size_t>(4 * ((bytes + 2) / 3)), '\0');
  const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                      reinterpret_cast<const unsigned char*>(values.data()), bytes);
  out.resize(static_cast<size_t>(written));
  return out;
}

}  // namespace

EmbeddingPooling read_embedding_pooling(const std::filesystem::path& model_path) {
  EmbeddingPooling pooling;
  const std::filesystem::path modules_path = model_path / "modules.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(modules_path, ec)) return pooling;
  const nlohmann::json modules = read_json_file(modules_path);
  if (!modules.is_array()) fail("{}: expected a list of modules", modules_path.string());
  pooling.normalize = false;
  for (const nlohmann::json& module : modules) {
    const std::string type = module.is_object() ? module.value("type", "") : "";
    if (type.ends_with(".Normalize")) pooling.normalize = true;
    if (!type.ends_with(".Pooling")) continue;
    const std::filesystem::path config = model_path / module.value("path", "") / "config.json";
    const std::string mode = pooling_mode(read_json_file(config));
    if (mode != "lasttoken") pooling.unsupported = mode.empty() ? "none" : mode;
  }
  return pooling;
}

nlohmann::json run_embeddings(Engine& engine, const ServedModel& model, const EmbeddingRequest& request,
                              std::chrono::seconds timeout) {
  if (!model.pooling.unsupported.empty())
    throw ApiException(api_error(400, fmt::format("this model's sentence-transformers config pools by '{}'; "
                                                  "tokenmill serves last-token pooling only",
                                                  model.pooling.unsupported)));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<std::shared_ptr<RequestStream>> streams;
  // Every input is submitted before any is awaited, so they share the engine's steps; a
  // refused one cancels those already submitted.
  struct Cancel {
    std::vector<std::shared_ptr<RequestStream>>& streams;
    ~Cancel() {
      for (const auto& s : streams) s->cancel();
    }
  } cancel{streams};
  for (const std::vector<int32_t>& input : request.inputs) {
    EngineRequest r;
    r.prompt = input;
    r.embed = true;
    r.adapter = request.adapter;
    r.deadline = deadline;
    streams.push_back(engine.submit(std::move(r)));
  }
  nlohmann::json data = nlohmann::json::array();
  int64_t prompt_tokens = 0;
  for (size_t i = 0; i < streams.size(); ++i) {
    StreamEvent event;
    do {
      if (!streams[i]->next(event, std::chrono::steady_clock::time_point::max()))
        fail("embeddings: the engine stopped answering");
    } while (!event.finish);
    if (*event.finish != FinishReason::Stop || event.embedding.empty())
      throw ApiException(
          api_error(*event.finish == FinishReason::Timeout ? 408 : 503,
                    fmt::format("input {} ended early ({})", i, finish_reason_name(*event.finish))));
    prompt_tokens += event.prompt_tokens;
    std::vector<float>& values = event.embedding;
    if (request.dimensions) values.resize(static_cast<size_t>(*request.dimensions));
    if (model.pooling.normalize) {
      double squares = 0;
      for (const float v : values) squares += static_cast<double>(v) * v;
      const double norm = std::sqrt(squares);
      if (norm > 0)
        for (float& v : values) v = static_cast<float>(v / norm);
    }
    nlohmann::json embedding =
        request.base64 ? nlohmann::json(base64_floats(values)) : nlohmann::json(values);
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(embedding)}});
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", request.model},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

}  // namespace tokenmill
