// libFuzzer target for the OpenAI request parser (serve/openai_request.h): arbitrary HTTP
// bodies for /v1/completions, /v1/chat/completions, /tokenize, /detokenize and /v1/embeddings,
// against the SmolLM2 fixture tokenizer and its chat template, in a 256-token context.
//
// The first input byte picks the endpoint (value % 5); the rest is the body.
// Properties checked: the only exception is ApiException with status 400 or 404 (anything
// else would be a 500 or a crash in the server); an accepted generation request has n choices
// per prompt, each with a non-empty prompt of ids in the vocabulary that leaves room for
// max_tokens >= 1 in the context, stop strings and logprobs within the limits; token ids from
// /tokenize and /detokenize are in the vocabulary; an accepted embeddings request has
// non-empty inputs of ids in the vocabulary and dimensions within [1, hidden size].
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string_view>
#include <vector>

#include "serve/openai_request.h"

namespace {

using tokenmill::ServedModel;

constexpr int64_t kContext = 256;
constexpr int64_t kHidden = 64;

const ServedModel& served() {
  static const tokenmill::Tokenizer tokenizer = tokenmill::Tokenizer::from_model_dir(
      std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "hf" / "smollm_chat");
  static const ServedModel model{.id = "smollm",
                                 .tokenizer = tokenizer,
                                 .chat_template = tokenmill::ChatTemplate(tokenizer.chat_template()),
                                 .context_length = kContext,
                                 .created = 1700000000,
                                 .limits = {},
                                 .hidden_size = kHidden};
  return model;
}

void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "openai_request_fuzz: property violated: %s\n", what);
  __builtin_trap();
}

void check_ids(const std::vector<int32_t>& ids) {
  for (const int32_t id : ids)
    check(id >= 0 && id < served().tokenizer.vocab_size(), "ids in the vocabulary");
}

void check_generation(const tokenmill::ParsedRequest& parsed) {
  const tokenmill::ServeLimits& limits = served().limits;
  check(parsed.n >= 1 && parsed.n <= limits.max_n, "n within [1, max_n]");
  check(!parsed.requests.empty() && parsed.requests.size() % static_cast<size_t>(parsed.n) == 0,
        "n requests per prompt");
  for (const tokenmill::EngineRequest& r : parsed.requests) {
    check(!r.prompt.empty(), "a non-empty prompt");
    check_ids(r.prompt);
    check(r.max_tokens >= 1, "max_tokens >= 1");
    check(static_cast<int64_t>(r.prompt.size()) + r.max_tokens <= kContext,
          "prompt + max_tokens fit the context");
    check(r.stop.size() <= static_cast<size_t>(limits.max_stop), "stop strings within max_stop");
    for (const std::string& s : r.stop) check(!s.empty(), "stop strings are not empty");
    check(r.top_logprobs <= limits.max_top_logprobs, "top_logprobs within the limit");
    check_ids(r.stop_token_ids);
  }
}

void check_embeddings(const tokenmill::EmbeddingRequest& request) {
  check(!request.inputs.empty(), "at least one input");
  for (const std::vector<int32_t>& input : request.inputs) {
    check(!input.empty(), "non-empty inputs");
    check_ids(input);
  }
  check(!request.dimensions || (*request.dimensions >= 1 && *request.dimensions <= kHidden),
        "dimensions within [1, hidden size]");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    const nlohmann::json json = tokenmill::parse_json_body(body);
    switch (data[0] % 5) {
      case 0: check_generation(tokenmill::parse_completion(json, served())); break;
      case 1: check_generation(tokenmill::parse_chat(json, served())); break;
      case 2: check_ids(tokenmill::parse_tokenize(json, served())); break;
      case 3: check_ids(tokenmill::parse_detokenize(json, served())); break;
      default: check_embeddings(tokenmill::parse_embeddings(json, served())); break;
    }
  } catch (const tokenmill::ApiException& e) {
    check(e.error().status == 400 || e.error().status == 404, "errors are 400 or 404");
  }
  return 0;
}
