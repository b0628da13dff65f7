#include "serve/openai_response.h"

#include <cmath>
#include <random>

namespace tokenmill {

namespace {

using nlohmann::json;

// JSON has no -inf: vLLM's floor for impossible tokens.
constexpr float kMinLogprob = -9999.0f;

json logprob_value(float logprob) {
  return std::isfinite(logprob) && logprob > kMinLogprob ? logprob : kMinLogprob;
}

json finish_value(const std::optional<FinishReason>& finish) {
  return finish ? json(openai_finish_reason(*finish)) : json(nullptr);
}

std::string token_text(const Tokenizer& tokenizer, int32_t token) {
  const int32_t ids[] = {token};
  return tokenizer.decode(ids);
}

// The token's own bytes (raw, even when they are part of a character), as ints.
json token_bytes(const Tokenizer& tokenizer, int32_t token) {
  json bytes = json::array();
  for (const char c : tokenizer.token_bytes(token)) bytes.push_back(static_cast<unsigned char>(c));
  return bytes;
}

// Completions: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}.
json completion_logprobs(const ResponseContext& context, const ChoiceOutput& choice) {
  if (!context.logprobs) return nullptr;
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(),
       text_offset = json::array();
  int64_t offset = choice.text_offset;
  for (const TokenLogprob& step : choice.logprobs) {
    const std::string text = token_text(context.tokenizer, step.token);
    json top = json::object();
    for (const TopLogprob& alternative : step.top)
      top[token_text(context.tokenizer, alternative.token)] = logprob_value(alternative.logprob);
    top[text] = logprob_value(step.logprob);
    tokens.push_back(text);
    token_logprobs.push_back(logprob_value(step.logprob));
    top_logprobs.push_back(std::move(top));
    text_offset.push_back(offset);
    offset += utf8_length(text);
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(text_offset)}};
}

json chat_token(const Tokenizer& tokenizer, int32_t token, float logprob) {
  return {{"token", token_text(tokenizer, token)},
          {"logprob", logprob_value(logprob)},
          {"bytes", token_bytes(tokenizer, token)}};
}

// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}.
json chat_logprobs(const ResponseContext& context, const ChoiceOutput& choice) {
  if (!context.logprobs) return nullptr;
  json content = json::array();
  for (const TokenLogprob& step : choice.logprobs) {
    json entry = chat_token(context.tokenizer, step.token, step.logprob);
    json top = json::array();
    for (const TopLogprob& alternative : step.top)
      top.push_back(chat_token(context.tokenizer, alternative.token, alternative.logprob));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return {{"content", std::move(content)}};
}

json usage_value(const Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_prompt_tokens}}}};
}

json envelope(const ResponseContext& context, std::string_view object, json choices) {
  return {{"id", context.id},
          {"object", object},
          {"created", context.created},
          {"model", context.model},
          {"choices", std::move(choices)}};
}

// A stream chunk: with include_usage, "usage" is null on every chunk but the usage chunk.
json chunk(const ResponseContext& context, std::string_view object, json choice) {
  json out = envelope(context, object, json::array({std::move(choice)}));
  if (context.include_usage) out["usage"] = nullptr;
  return out;
}

json completion_choice(const ResponseContext& context, const ChoiceOutput& choice) {
  return {{"index", choice.index},
          {"text", choice.text},
          {"logprobs", completion_logprobs(context, choice)},
          {"finish_reason", finish_value(choice.finish)}};
}

constexpr std::string_view kCompletionObject = "text_completion";
constexpr std::string_view kChatObject = "chat.completion";
constexpr std::string_view kChatChunkObject = "chat.completion.chunk";

}  // namespace

std::string new_response_id(std::string_view prefix) {
  static constexpr std::string_view kAlphabet =
      "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  std::random_device device;
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string id(prefix);
  id += '-';
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(device)];
  return id;
}

namespace {

// [{index, id, type: "function", function: {name, arguments}}] (index counts the choice's calls).
json tool_calls_value(const ChoiceOutput& choice) {
  json calls = json::array();
  for (size_t i = 0; i < choice.tool_calls.size(); ++i)
    calls.push_back(
        {{"index", choice.first_tool_call + static_cast<int64_t>(i)},
         {"id", new_response_id("call")},
         {"type", "function"},
         {"function", {{"name", choice.tool_calls[i].name}, {"arguments", choice.tool_calls[i].arguments}}}});
  return calls;
}

// "tool_calls" for a choice that called tools and stopped on its own.
json chat_finish_value(const ChoiceOutput& choice) {
  if (choice.finish == FinishReason::Stop && (choice.called_tools || !choice.tool_calls.empty()))
    return "tool_calls";
  return finish_value(choice.finish);
}

}  // namespace

const char* openai_finish_reason(FinishReason reason) {
  switch (reason) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled:
    case FinishReason::Error:
    case FinishReason::Timeout:
    case FinishReason::Shutdown: break;
  }
  return "abort";  // cut short by the server, not by the request's own limits
}

int64_t utf8_length(std::string_view text) {
  int64_t count = 0;
  for (const char c : text) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

nlohmann::json completion_response(const ResponseContext& context, std::span<const ChoiceOutput> choices,
                                   const Usage& usage) {
  json list = json::array();
  for (const ChoiceOutput& choice : choices) list.push_back(completion_choice(context, choice));
  json out = envelope(context, kCompletionObject, std::move(list));
  out["usage"] = usage_value(usage);
  return out;
}

nlohmann::json completion_chunk(const ResponseContext& context, const ChoiceOutput& choice) {
  return chunk(context, kCompletionObject, completion_choice(context, choice));
}

nlohmann::json completion_usage_chunk(const ResponseContext& context, const Usage& usage) {
  json out = envelope(context, kCompletionObject, json::array());
  out["usage"] = usage_value(usage);
  return out;
}

nlohmann::json chat_response(const ResponseContext& context, std::span<const ChoiceOutput> choices,
                             const Usage& usage) {
  json list = json::array();
  for (const ChoiceOutput& choice : choices) {
    json message = {{"role", "assistant"}, {"content", choice.text}};
    if (!choice.tool_calls.empty()) {
      if (choice.text.empty()) message["content"] = nullptr;
      message["tool_calls"] = tool_calls_value(choice);
    }
    list.push_back({{"index", choice.index},
                    {"message", std::move(message)},
                    {"logprobs", chat_logprobs(context, choice)},
                    {"finish_reason", chat_finish_value(choice)}});
  }
  json out = envelope(context, kChatObject, std::move(list));
  out["usage"] = usage_value(usage);
  return out;
}

nlohmann::json chat_role_chunk(const ResponseContext& context, int64_t index) {
  return chunk(context, kChatChunkObject,
               {{"index", index},
                {"delta", {{"role", "assistant"}, {"content", ""}}},
                {"logprobs", nullptr},
                {"finish_reason", nullptr}});
}

nlohmann::json chat_chunk(const ResponseContext& context, const ChoiceOutput& choice) {
  json delta = json::object();
  if (!choice.text.empty() || !choice.logprobs.empty()) delta["content"] = choice.text;
  if (!choice.tool_calls.empty()) delta["tool_calls"] = tool_calls_value(choice);
  return chunk(context, kChatChunkObject,
               {{"index", choice.index},
                {"delta", std::move(delta)},
                {"logprobs", chat_logprobs(context, choice)},
                {"finish_reason", chat_finish_value(choice)}});
}

nlohmann::json chat_usage_chunk(const ResponseContext& context, const Usage& usage) {
  json out = envelope(context, kChatChunkObject, json::array());
  out["usage"] = usage_value(usage);
  return out;
}

nlohmann::json models_list(const ServedModel& model) {
  const auto entry = [&](const std::string& id) {
    return json{{"id", id},
                {"object", "model"},
                {"created", model.created},
                {"owned_by", "tokenmill"},
                {"root", model.id},
                {"max_model_len", model.context_length}};
  };
  json data = json::array({entry(model.id)});
  for (const std::string& adapter : model.adapters) {
    data.push_back(entry(adapter));
    data.back()["parent"] = model.id;
  }
  return {{"object", "list"}, {"data", data}};
}

nlohmann::json tokenize_response(std::span<const int32_t> tokens, int64_t max_model_len) {
  return {{"count", tokens.size()},
          {"max_model_len", max_model_len},
          {"tokens", std::vector<int32_t>(tokens.begin(), tokens.end())}};
}

nlohmann::json detokenize_response(const Tokenizer& tokenizer, std::span<const int32_t> tokens) {
  return {{"prompt", tokenizer.decode(tokens)}};
}

std::string dump_json(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_data(const nlohmann::json& value) { return "data: " + dump_json(value) + "\n\n"; }

}  // namespace tokenmill
