// OpenAI-compatible request bodies -> engine requests: POST /v1/completions,
// POST /v1/chat/completions, and vLLM's POST /tokenize and POST /detokenize.
//
// Every problem is an ApiException (api_error.h): 400 invalid_request_error naming the field
// in `param` ("temperature", "prompt[1]", "messages[2].content") with the expected type or
// range, 404 code "model_not_found" for another model's name. Conventions:
//   - A field that is absent or null takes its default (as OpenAI does).
//   - Unknown fields are ignored (as OpenAI does); known fields whose feature tokenmill lacks
//     (echo: true, best_of != n, suffix, logit_bias, tools, functions) are refused rather
//     than silently ignored. `response_format` and `grammar`: structured outputs (see
//     structured_output.h; the raw body keeps a schema's property order).
//   - Integers may be written as floats without a fraction (16.0); 16.5 is refused. Huge
//     values are range errors.
//   - `model` may be omitted: the one served model answers (as vLLM and llama-server do).
// Limits:
//   - max_tokens >= 1 (tokenmill does not support echo, so 0 would produce nothing). For
//     completions it defaults to 16 (OpenAI's default), cut to the room left in the context;
//     for chat to the room left. A max_tokens larger than the room left (context - prompt
//     length) is 400 code "context_length_exceeded", as OpenAI and vLLM answer, unless
//     limits.clamp_max_tokens cuts it to the room left; a prompt that leaves no room is the
//     same 400.
//   - temperature [0, 2], default 1 (OpenAI's); 0 is greedy. top_p (0, 1]; min_p [0, 1];
//     top_k >= -1 (vLLM extension; -1 and 0 are off); repetition_penalty > 0 (vLLM
//     extension); frequency_penalty and presence_penalty [-2, 2]; seed any integer in
//     [-2^63, 2^64).
//   - n [1, limits.max_n]; stop: a string or up to limits.max_stop non-empty strings;
//     logprobs (completions) [0, limits.max_top_logprobs]; top_logprobs (chat) the same,
//     and needs logprobs: true.
//   - stream_options is only allowed with stream: true.
//   - vLLM extensions: ignore_eos (bool), stop_token_ids (ids in the vocabulary),
//     skip_special_tokens (bool, default true).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/constrained_grammar.h"
#include "serve/api_error.h"
#include "serve/engine_request.h"
#include "serve/tool_calls.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tokenmill {

struct ServeLimits {
  int32_t max_n = 16;             // choices per prompt
  int32_t max_top_logprobs = 20;  // completions `logprobs`, chat `top_logprobs`
  int32_t max_stop = 4;           // stop strings
  int32_t max_prompts = 64;       // prompts in one /v1/completions request
  bool clamp_max_tokens = false;  // a max_tokens over the room left is cut to it, not a 400
};

// The model as the server presents it; the server owns what the references point to.
// How /v1/embeddings turns a prompt's hidden states into its embedding (serve/embeddings.h):
// the last token's final hidden state, L2-normalised unless the model's sentence-transformers
// config has no Normalize module. `unsupported`: the pooling mode that config asks for when
// tokenmill does not run it (embedding requests are then refused, naming it).
struct EmbeddingPooling {
  bool normalize = true;
  std::string unsupported;
};

struct ServedModel {
  std::string id;  // what /v1/models lists and `model` must equal (or one of `adapters`)
  const Tokenizer& tokenizer;
  std::optional<ChatTemplate> chat_template;  // absent: chat requests are refused
  int64_t context_length = 0;                 // tokens, prompt + completion
  int64_t created = 0;                        // unix seconds, for /v1/models
  ServeLimits limits;
  // Compiles structured-output grammars for this tokenizer; null: such requests are refused.
  std::shared_ptr<GrammarCache> grammars = nullptr;
  ToolFormat tool_format = ToolFormat::Hermes;  // how the chat template teaches tool calls
  int64_t hidden_size = 0;                      // the width of an embedding
  EmbeddingPooling pooling{};
  // LoRA adapters served beside it (`--lora NAME=DIR`): a request whose `model` names one runs
  // with it (EngineRequest::adapter, the index here).
  std::vector<std::string> adapters{};
};

// What the response needs to know about the request.
struct ResponseOptions {
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // each choice reports logprobs
  bool tool_calls = false;     // chat: the answer's tool calls are cut out (tool_calls.h)
  ToolFormat tool_format = ToolFormat::Hermes;
};

// A generation request: one engine request per choice; requests[k] is choice index k, the
// choices of prompt p being p * n ... p * n + n - 1.
struct ParsedRequest {
  std::string model;  // the served model's id or the adapter's name, echoed in responses
  int32_t n = 1;
  std::vector<EngineRequest> requests;
  ResponseOptions options;
};

// Parses an HTTP body: a JSON object whose strings are valid UTF-8 (nlohmann's parser rejects
// invalid UTF-8 and lone surrogate escapes). Otherwise 400 "could not parse the JSON body: ...".
nlohmann::json parse_json_body(std::string_view body);

// POST /v1/completions. `prompt` is a string, an array of strings, an array of token ids or
// an array of arrays of token ids; each string or id array is one prompt. Strings are
// tokenized as Hugging Face's tokenizer(prompt) does: the tokenizer's BOS added when it adds
// one, special tokens written in the text recognised.
ParsedRequest parse_completion(const nlohmann::json& body, const ServedModel& model,
                               std::string_view raw_body = {});

// POST /v1/chat/completions. `messages`: a non-empty array of {role, content}, role one of
// system, developer, user, assistant, tool; content a string or an array of
// {"type": "text", "text"} parts (joined with "\n", as vLLM does). Rendered with the model's
// chat template (add_generation_prompt) and tokenized without added BOS/EOS, special tokens
// recognised (as ChatSession does). `max_completion_tokens` wins over `max_tokens`.
ParsedRequest parse_chat(const nlohmann::json& body, const ServedModel& model,
                         std::string_view raw_body = {});

// A request's prompts under `key` ("prompt", or "input" for embeddings): a string, an array
// of strings, an array of token ids or an array of arrays of token ids; each string or id
// array is one prompt, strings tokenized as parse_completion says. At most
// limits.max_prompts of them.
std::vector<std::vector<int32_t>> read_prompt_list(const nlohmann::json& body, const std::string& key,
                                                   const ServedModel& model);

// POST /v1/embeddings (serve/embeddings.h).
struct EmbeddingRequest {
  std::string model;                         // the served model's id or adapter's, echoed in the response
  int32_t adapter = -1;                      // EngineRequest::adapter
  std::vector<std::vector<int32_t>> inputs;  // tokenized as completion prompts are
  bool base64 = false;                       // encoding_format "base64": little-endian f32 bytes
  std::optional<int64_t> dimensions;         // keep the first `dimensions` values (then normalise)
};

// {model?, input, encoding_format = "float", dimensions?, user?}: `input` as a completion's
// `prompt`; encoding_format "float" or "base64"; dimensions in [1, hidden_size]. Errors name
// the field.
EmbeddingRequest parse_embeddings(const nlohmann::json& body, const ServedModel& model);

// POST /tokenize (vLLM): {model?, prompt, add_special_tokens = true} or
// {model?, messages, add_generation_prompt = true, add_special_tokens = false}.
std::vector<int32_t> parse_tokenize(const nlohmann::json& body, const ServedModel& model);

// POST /detokenize (vLLM): {model?, tokens: [ids]} -> the ids (each in the vocabulary).
std::vector<int32_t> parse_detokenize(const nlohmann::json& body, const ServedModel& model);

}  // namespace tokenmill
