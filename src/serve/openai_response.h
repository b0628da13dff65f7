// Engine results -> OpenAI-compatible response JSON (and vLLM's /tokenize, /detokenize),
// plus server-sent-event framing for streams.
//
// Shapes (OpenAI's):
//   completions  {"id": "cmpl-...", "object": "text_completion", "created", "model",
//                 "choices": [{"index", "text", "logprobs", "finish_reason"}], "usage"}
//                 logprobs: null or {"tokens", "token_logprobs", "top_logprobs": [{text: logprob}],
//                 "text_offset"}; each top_logprobs entry holds the requested alternatives plus the
//                 sampled token (OpenAI: "up to logprobs + 1 elements").
//   chat         {"id": "chatcmpl-...", "object": "chat.completion", ..., "choices": [{"index",
//                 "message": {"role": "assistant", "content"}, "logprobs", "finish_reason"}],
//                 "usage"}; logprobs: null or {"content": [{"token", "logprob", "bytes",
//                 "top_logprobs": [{"token", "logprob", "bytes"}]}]}.
//   usage        {"prompt_tokens", "completion_tokens", "total_tokens",
//                 "prompt_tokens_details": {"cached_tokens"}}
//   streaming    the same objects per event ("text_completion" / "chat.completion.chunk" with
//                 "delta" in place of "message"), finish_reason null until the last event; with
//                 include_usage every chunk has "usage": null and a last chunk has "choices": []
//                 and the usage.
// A token's text is tokenizer.decode of that one id (special tokens shown; a token that is
// only part of a UTF-8 character shows as U+FFFD); chat's `bytes` are the token's own raw
// bytes (Tokenizer::token_bytes), so joining them gives the message's UTF-8 back, as
// OpenAI documents. Logprobs below -9999 (or -inf) are sent as
// -9999.0, as vLLM does, since JSON has no infinity.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/engine_request.h"
#include "serve/openai_request.h"
#include "serve/tool_calls.h"
#include "tokenizer/tokenizer.h"

namespace tokenmill {

// What every object of one response (every chunk of a stream) shares.
struct ResponseContext {
  std::string id;       // new_response_id("cmpl") or new_response_id("chatcmpl")
  int64_t created = 0;  // unix seconds
  std::string model;
  const Tokenizer& tokenizer;  // for the text of logprob tokens
  bool logprobs = false;       // the request asked for logprobs (else "logprobs": null)
  bool include_usage = false;  // streaming: chunks carry "usage": null (see *_usage_chunk)
};

// Token counts; a prompt counts once however many choices it has (as OpenAI counts).
struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_prompt_tokens = 0;  // prompt tokens served from the prefix cache
};

// One choice's output: the whole generation (responses) or one stream event (chunks).
struct ChoiceOutput {
  int64_t index = 0;
  std::string text;
  std::vector<TokenLogprob> logprobs;  // one per generated token when logprobs were asked
  std::optional<FinishReason> finish;  // set on the last output of the choice
  // Completions logprobs: characters (code points) of this choice's text sent before
  // `text`; text_offset counts on from here. Add utf8_length(text) after each chunk.
  int64_t text_offset = 0;
  // Chat with tools: the calls cut out of the text (tool_calls.h); in a stream, those of this
  // chunk, numbered from first_tool_call, with called_tools set once the choice made any
  // (its finish_reason is then "tool_calls").
  std::vector<ToolCall> tool_calls;
  int64_t first_tool_call = 0;
  bool called_tools = false;
};

// "<prefix>-" followed by 24 random letters and digits.
std::string new_response_id(std::string_view prefix);

// OpenAI's finish_reason: Length -> "length" (max_tokens or the context), Stop -> "stop";
// Timeout (--request-timeout), Shutdown, Cancelled and Error -> "abort" (vLLM's word for a
// request the engine gave up on), so a client can tell a cut answer from a complete one.
const char* openai_finish_reason(FinishReason reason);

// Unicode code points in valid UTF-8 text (Python's len(), which OpenAI's text_offset uses).
int64_t utf8_length(std::string_view text);

nlohmann::json completion_response(const ResponseContext& context, std::span<const ChoiceOutput> choices,
                                   const Usage& usage);
nlohmann::json completion_chunk(const ResponseContext& context, const ChoiceOutput& choice);
nlohmann::json completion_usage_chunk(const ResponseContext& context, const Usage& usage);

nlohmann::json chat_response(const ResponseContext& context, std::span<const ChoiceOutput> choices,
                             const Usage& usage);
// The first chunk of each choice: delta {"role": "assistant", "content": ""}.
nlohmann::json chat_role_chunk(const ResponseContext& context, int64_t index);
// delta {"content": text} when there is text (or logprobs), else {}; finish_reason on the last.
nlohmann::json chat_chunk(const ResponseContext& context, const ChoiceOutput& choice);
nlohmann::json chat_usage_chunk(const ResponseContext& context, const Usage& usage);

// GET /v1/models: {"object": "list", "data": [{"id", "object": "model", "created",
// "owned_by": "tokenmill", "root": the served model's id, "max_model_len"}, ...]}: the served
// model, then each LoRA adapter with "parent": the served model's id (as vLLM lists them).
nlohmann::json models_list(const ServedModel& model);

// POST /tokenize: {"count", "max_model_len", "tokens"}; POST /detokenize: {"prompt"}.
nlohmann::json tokenize_response(std::span<const int32_t> tokens, int64_t max_model_len);
nlohmann::json detokenize_response(const Tokenizer& tokenizer, std::span<const int32_t> tokens);

// Compact JSON text; never throws (invalid UTF-8 would be replaced by U+FFFD).
std::string dump_json(const nlohmann::json& value);

// One server-sent event: "data: <json>\n\n"; a stream ends with kSseDone.
std::string sse_data(const nlohmann::json& value);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace tokenmill
