// OpenAI response rendering: completion and chat objects and stream chunks field by field
// (keys, types, values), logprobs in both APIs' shapes, usage, finish reasons, /v1/models,
// /tokenize and /detokenize, error bodies, ids, and SSE framing that never throws.
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "serve/openai_response.h"
#include "support/fixture_tokenizer.h"

namespace tokenmill {
namespace {

using nlohmann::json;

const Tokenizer& smollm() { return testing::smollm_chat_tokenizer(); }

std::string text_of(int32_t token) {
  const int32_t ids[] = {token};
  return smollm().decode(ids);
}

ResponseContext context(bool logprobs = false, bool include_usage = false) {
  return ResponseContext{.id = "cmpl-abc",
                         .created = 1700000000,
                         .model = "smollm",
                         .tokenizer = smollm(),
                         .logprobs = logprobs,
                         .include_usage = include_usage};
}

// A choice output (designated initializers would have to name every field under -Wextra).
ChoiceOutput output(int64_t index, std::string text, std::optional<FinishReason> finish = {},
                    std::vector<TokenLogprob> logprobs = {}, int64_t text_offset = 0) {
  ChoiceOutput out;
  out.index = index;
  out.text = std::move(text);
  out.finish = finish;
  out.logprobs = std::move(logprobs);
  out.text_offset = text_offset;
  return out;
}

// Renders through text, as a client sees it.
json round_trip(const json& value) { return json::parse(dump_json(value)); }

void expect_envelope(const json& out, std::string_view object) {
  ASSERT_TRUE(out.is_object());
  EXPECT_EQ(out.at("id"), "cmpl-abc");
  EXPECT_EQ(out.at("object"), object);
  EXPECT_EQ(out.at("created"), 1700000000);
  EXPECT_EQ(out.at("model"), "smollm");
  EXPECT_TRUE(out.at("choices").is_array());
}

void expect_usage(const json& usage, int64_t prompt, int64_t completion, int64_t cached) {
  EXPECT_EQ(usage.at("prompt_tokens"), prompt);
  EXPECT_EQ(usage.at("completion_tokens"), completion);
  EXPECT_EQ(usage.at("total_tokens"), prompt + completion);
  EXPECT_EQ(usage.at("prompt_tokens_details").at("cached_tokens"), cached);
}

// Tokens of " Hello world" with logprobs: the chosen token, then two alternatives.
std::vector<TokenLogprob> sample_logprobs() {
  std::vector<TokenLogprob> out;
  float logprob = -0.5f;
  for (int32_t token : smollm().encode(" Hello world", {.add_special_tokens = false}))
    out.push_back({token, logprob -= 0.25f, {{token, logprob}, {token + 1, logprob - 1.0f}}});
  return out;
}

TEST(OpenAiResponse, CompletionFieldByField) {
  const std::vector<ChoiceOutput> choices = {output(0, "Hi there", FinishReason::Stop),
                                             output(1, "Hello", FinishReason::Length)};
  const json out = round_trip(completion_response(
      context(), choices, {.prompt_tokens = 5, .completion_tokens = 7, .cached_prompt_tokens = 2}));
  expect_envelope(out, "text_completion");
  EXPECT_EQ(out.size(), 6u);  // id, object, created, model, choices, usage
  ASSERT_EQ(out["choices"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const json& choice = out["choices"][i];
    EXPECT_EQ(choice.size(), 4u);
    EXPECT_EQ(choice.at("index"), i);
    EXPECT_EQ(choice.at("text"), choices[i].text);
    EXPECT_TRUE(choice.at("logprobs").is_null());
  }
  EXPECT_EQ(out["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(out["choices"][1]["finish_reason"], "length");
  expect_usage(out.at("usage"), 5, 7, 2);
}

TEST(OpenAiResponse, CompletionLogprobs) {
  const std::vector<TokenLogprob> logprobs = sample_logprobs();
  ASSERT_GE(logprobs.size(), 2u);
  const ChoiceOutput choice = output(0, " Hello world", {}, logprobs, 10);
  const json out = round_trip(completion_chunk(context(/*logprobs=*/true), choice));
  const json& lp = out.at("choices").at(0).at("logprobs");
  ASSERT_TRUE(lp.is_object());
  EXPECT_EQ(lp.size(), 4u);
  int64_t offset = 10;
  for (size_t i = 0; i < logprobs.size(); ++i) {
    SCOPED_TRACE(i);
    const std::string text = text_of(logprobs[i].token);
    EXPECT_EQ(lp.at("tokens").at(i), text);
    EXPECT_FLOAT_EQ(lp.at("token_logprobs").at(i).get<float>(), logprobs[i].logprob);
    // The alternatives plus the sampled token (here the first alternative).
    const json& top = lp.at("top_logprobs").at(i);
    ASSERT_EQ(top.size(), 2u);
    EXPECT_FLOAT_EQ(top.at(text).get<float>(), logprobs[i].logprob);
    EXPECT_FLOAT_EQ(top.at(text_of(logprobs[i].token + 1)).get<float>(), logprobs[i].top[1].logprob);
    EXPECT_EQ(lp.at("text_offset").at(i), offset);
    offset += utf8_length(text);
  }
  EXPECT_EQ(offset, 10 + utf8_length(" Hello world"));

  // logprobs: 0 still reports the sampled token.
  const ChoiceOutput bare = output(0, "", {}, {{.token = 42, .logprob = -1.5f, .top = {}}});
  const json zero = round_trip(completion_chunk(context(true), bare));
  EXPECT_EQ(zero["choices"][0]["logprobs"]["top_logprobs"][0], (json{{text_of(42), -1.5}}));
}

TEST(OpenAiResponse, ImpossibleTokensGetVllmsFloor) {
  const float inf = std::numeric_limits<float>::infinity();
  const ChoiceOutput choice =
      output(0, "", {}, {{.token = 7, .logprob = -inf, .top = {{.token = 8, .logprob = -1e30f}}}});
  const json completion = round_trip(completion_chunk(context(true), choice));
  EXPECT_EQ(completion["choices"][0]["logprobs"]["token_logprobs"][0], -9999.0);
  EXPECT_EQ(completion["choices"][0]["logprobs"]["top_logprobs"][0][text_of(8)], -9999.0);
  const json chat = round_trip(chat_chunk(context(true), choice));
  EXPECT_EQ(chat["choices"][0]["logprobs"]["content"][0]["logprob"], -9999.0);
}

TEST(OpenAiResponse, ChatFieldByField) {
  const std::vector<ChoiceOutput> choices = {output(0, "Hello!", FinishReason::Stop)};
  const json out =
      round_trip(chat_response(context(), choices, {.prompt_tokens = 20, .completion_tokens = 3}));
  expect_envelope(out, "chat.completion");
  ASSERT_EQ(out["choices"].size(), 1u);
  const json& choice = out["choices"][0];
  EXPECT_EQ(choice.size(), 4u);
  EXPECT_EQ(choice.at("index"), 0);
  EXPECT_EQ(choice.at("message"), (json{{"role", "assistant"}, {"content", "Hello!"}}));
  EXPECT_TRUE(choice.at("logprobs").is_null());
  EXPECT_EQ(choice.at("finish_reason"), "stop");
  expect_usage(out.at("usage"), 20, 3, 0);
}

TEST(OpenAiResponse, ChatLogprobs) {
  const std::vector<TokenLogprob> logprobs = sample_logprobs();
  const std::vector<ChoiceOutput> choices = {output(0, " Hello world", FinishReason::Stop, logprobs)};
  const json out = round_trip(chat_response(context(true), choices, {}));
  const json& content = out["choices"][0].at("logprobs").at("content");
  ASSERT_EQ(content.size(), logprobs.size());
  const auto expect_token = [](const json& entry, int32_t token, float logprob) {
    const std::string text = text_of(token);
    EXPECT_EQ(entry.at("token"), text);
    EXPECT_FLOAT_EQ(entry.at("logprob").get<float>(), logprob);
    std::vector<int> bytes;
    for (const char c : text) bytes.push_back(static_cast<unsigned char>(c));
    EXPECT_EQ(entry.at("bytes").get<std::vector<int>>(), bytes);
  };
  for (size_t i = 0; i < logprobs.size(); ++i) {
    SCOPED_TRACE(i);
    const json& entry = content[i];
    EXPECT_EQ(entry.size(), 4u);
    expect_token(entry, logprobs[i].token, logprobs[i].logprob);
    ASSERT_EQ(entry.at("top_logprobs").size(), 2u);
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(entry["top_logprobs"][k].size(), 3u);
      expect_token(entry["top_logprobs"][k], logprobs[i].top[k].token, logprobs[i].top[k].logprob);
    }
  }
  // A token holding part of a UTF-8 character (this 512-token vocabulary splits "é", C3 A9,
  // into two byte tokens) shows as U+FFFD, but its bytes are its own: joined, they give "é".
  const std::vector<int32_t> e_acute = smollm().encode("\u00e9", {.add_special_tokens = false});
  ASSERT_EQ(e_acute.size(), 2u);
  const json two =
      round_trip(chat_chunk(context(true), output(0, "\u00e9", {},
                                                  {{.token = e_acute[0], .logprob = -1, .top = {}},
                                                   {.token = e_acute[1], .logprob = -1, .top = {}}})));
  const json& parts = two["choices"][0]["logprobs"]["content"];
  EXPECT_EQ(parts[0]["token"], "\ufffd");
  EXPECT_EQ(parts[0]["bytes"], (json{0xC3}));
  EXPECT_EQ(parts[1]["bytes"], (json{0xA9}));
}

TEST(OpenAiResponse, ChatStreamChunks) {
  const ResponseContext ctx = context(false, /*include_usage=*/true);
  const json role = round_trip(chat_role_chunk(ctx, 2));
  expect_envelope(role, "chat.completion.chunk");
  EXPECT_TRUE(role.contains("usage") && role["usage"].is_null());
  ASSERT_EQ(role["choices"].size(), 1u);
  EXPECT_EQ(role["choices"][0], (json{{"index", 2},
                                      {"delta", {{"role", "assistant"}, {"content", ""}}},
                                      {"logprobs", nullptr},
                                      {"finish_reason", nullptr}}));

  const json text = round_trip(chat_chunk(ctx, output(2, "Hel")));
  EXPECT_EQ(text["choices"][0]["delta"], (json{{"content", "Hel"}}));
  EXPECT_TRUE(text["choices"][0]["finish_reason"].is_null());

  const json last = round_trip(chat_chunk(ctx, output(2, "", FinishReason::Length)));
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");

  const json usage = round_trip(chat_usage_chunk(ctx, {.prompt_tokens = 4, .completion_tokens = 9}));
  expect_envelope(usage, "chat.completion.chunk");
  EXPECT_TRUE(usage["choices"].empty());
  expect_usage(usage.at("usage"), 4, 9, 0);

  // Without include_usage no chunk has a usage key.
  EXPECT_FALSE(chat_chunk(context(), output(0, "x")).contains("usage"));
}

TEST(OpenAiResponse, CompletionStreamChunks) {
  const ResponseContext ctx = context(false, /*include_usage=*/true);
  const json chunk = round_trip(completion_chunk(ctx, output(1, "lo")));
  expect_envelope(chunk, "text_completion");
  EXPECT_TRUE(chunk.contains("usage") && chunk["usage"].is_null());
  EXPECT_EQ(chunk["choices"][0],
            (json{{"index", 1}, {"text", "lo"}, {"logprobs", nullptr}, {"finish_reason", nullptr}}));
  const json last = round_trip(completion_chunk(ctx, output(1, "", FinishReason::Stop)));
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  const json usage = round_trip(completion_usage_chunk(ctx, {.prompt_tokens = 1, .completion_tokens = 2}));
  expect_envelope(usage, "text_completion");
  EXPECT_TRUE(usage["choices"].empty());
  expect_usage(usage["usage"], 1, 2, 0);
}

TEST(OpenAiResponse, FinishReasons) {
  EXPECT_STREQ(openai_finish_reason(FinishReason::Length), "length");
  EXPECT_STREQ(openai_finish_reason(FinishReason::Stop), "stop");
  EXPECT_STREQ(openai_finish_reason(FinishReason::Timeout), "abort");
  EXPECT_STREQ(openai_finish_reason(FinishReason::Shutdown), "abort");
  EXPECT_STREQ(openai_finish_reason(FinishReason::Error), "abort");
  EXPECT_STREQ(openai_finish_reason(FinishReason::Cancelled), "abort");
}

TEST(OpenAiResponse, ModelsTokenizeDetokenize) {
  const ServedModel model{.id = "smollm",
                          .tokenizer = smollm(),
                          .chat_template = {},
                          .context_length = 256,
                          .created = 1700000000,
                          .limits = {}};
  EXPECT_EQ(
      round_trip(models_list(model)),
      json::parse(R"({"object": "list", "data": [{"id": "smollm", "object": "model", "created": 1700000000,
                            "owned_by": "tokenmill", "root": "smollm", "max_model_len": 256}]})"));
  ServedModel with_adapters = model;
  with_adapters.adapters = {"sql", "poems"};
  const json listed = round_trip(models_list(with_adapters));
  ASSERT_EQ(listed["data"].size(), 3u);
  EXPECT_EQ(listed["data"][0]["id"], "smollm");
  EXPECT_FALSE(listed["data"][0].contains("parent"));
  for (const int i : {1, 2}) {
    EXPECT_EQ(listed["data"][i]["id"], i == 1 ? "sql" : "poems");
    EXPECT_EQ(listed["data"][i]["parent"], "smollm");
    EXPECT_EQ(listed["data"][i]["root"], "smollm");
    EXPECT_EQ(listed["data"][i]["max_model_len"], 256);
  }
  const std::vector<int32_t> tokens = smollm().encode("Hello world");
  EXPECT_EQ(round_trip(tokenize_response(tokens, 256)),
            (json{{"count", tokens.size()}, {"max_model_len", 256}, {"tokens", tokens}}));
  EXPECT_EQ(round_trip(detokenize_response(smollm(), tokens)), (json{{"prompt", "Hello world"}}));
}

TEST(OpenAiResponse, ErrorBodies) {
  const json full = error_body(api_error(404, "no such model", "model", "model_not_found"));
  EXPECT_EQ(full, json::parse(R"({"error": {"message": "no such model", "type": "not_found_error",
                                            "param": "model", "code": "model_not_found"}})"));
  const json bare = error_body(api_error(400, "bad"));
  EXPECT_TRUE(bare["error"]["param"].is_null());
  EXPECT_TRUE(bare["error"]["code"].is_null());
  EXPECT_EQ(bare["error"]["type"], "invalid_request_error");
  EXPECT_EQ(error_type(401), "authentication_error");
  EXPECT_EQ(error_type(403), "permission_error");
  EXPECT_EQ(error_type(413), "invalid_request_error");
  EXPECT_EQ(error_type(429), "rate_limit_error");
  EXPECT_EQ(error_type(500), "server_error");
  EXPECT_EQ(error_type(503), "server_error");
  // An ApiException is a tokenmill::Error carrying the message.
  try {
    fail_request("n", "n is {}", 3);
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "n is 3");
    const auto* api = dynamic_cast<const ApiException*>(&e);
    ASSERT_NE(api, nullptr);
    EXPECT_EQ(api->error().param, "n");
    EXPECT_EQ(api->error().status, 400);
  }
}

TEST(OpenAiResponse, IdsAndText) {
  const std::string a = new_response_id("chatcmpl"), b = new_response_id("chatcmpl");
  EXPECT_NE(a, b);
  ASSERT_EQ(a.size(), std::string("chatcmpl-").size() + 24);
  EXPECT_EQ(a.rfind("chatcmpl-", 0), 0u);
  for (const char c : a.substr(9)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << a;
  EXPECT_EQ(utf8_length(""), 0);
  EXPECT_EQ(utf8_length("h\u00e9llo\u20ac\U0001F600"), 7);
}

TEST(OpenAiResponse, SseFramingNeverThrows) {
  EXPECT_EQ(sse_data(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
  // Invalid UTF-8 (which no parsed body contains, but a bug might produce) is replaced.
  const json bad = {{"text", std::string("ok\xff")}};
  EXPECT_THROW((void)bad.dump(), json::type_error);
  EXPECT_EQ(sse_data(bad), "data: {\"text\":\"ok\xef\xbf\xbd\"}\n\n");
}

}  // namespace
}  // namespace tokenmill
