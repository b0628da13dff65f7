// OpenAI request parsing: every field's wrong type or out-of-range value is a 400 naming the
// field; defaults; prompt forms; n x prompts -> engine requests with their indices and seeds;
// context overflow and max_tokens clamping; chat messages rendered exactly as the SmolLM2
// chat template renders them; /tokenize and /detokenize bodies; JSON body parsing.
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "serve/openai_request.h"

namespace tokenmill {
namespace {

using nlohmann::json;

const std::filesystem::path kModelDir = std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "hf" / "smollm_chat";

const Tokenizer& smollm() {
  static const Tokenizer tokenizer = Tokenizer::from_model_dir(kModelDir);
  return tokenizer;
}

ServedModel served(int64_t context = 256) {
  return ServedModel{.id = "smollm",
                     .tokenizer = smollm(),
                     .chat_template = ChatTemplate(smollm().chat_template()),
                     .context_length = context,
                     .created = 1700000000,
                     .limits = {}};
}

std::vector<int32_t> encode(const std::string& text, bool add_special_tokens = true) {
  return smollm().encode(text, {.add_special_tokens = add_special_tokens, .parse_special = true});
}

// The ApiError that `fn` throws (a test failure if it throws none).
ApiError error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ApiException& e) {
    return e.error();
  }
  ADD_FAILURE() << "expected an ApiException";
  return {};
}

void expect_bad_request(const std::function<void()>& fn, const std::string& param,
                        const std::string& fragment) {
  const ApiError error = error_of(fn);
  EXPECT_EQ(error.status, 400) << error.message;
  EXPECT_EQ(error.type, "invalid_request_error");
  EXPECT_EQ(error.param, param) << error.message;
  EXPECT_NE(error.message.find(fragment), std::string::npos)
      << "message: " << error.message << "\nmissing: " << fragment;
}

// Every sampling field but the seed.
void expect_sampling(const SamplingParams& actual, const SamplingParams& expected) {
  EXPECT_EQ(actual.temperature, expected.temperature);
  EXPECT_EQ(actual.top_k, expected.top_k);
  EXPECT_EQ(actual.top_p, expected.top_p);
  EXPECT_EQ(actual.min_p, expected.min_p);
  EXPECT_EQ(actual.repetition_penalty, expected.repetition_penalty);
  EXPECT_EQ(actual.frequency_penalty, expected.frequency_penalty);
  EXPECT_EQ(actual.presence_penalty, expected.presence_penalty);
}

struct BadField {
  json patch;            // merged into a valid body
  std::string param;     // the field the 400 must name
  std::string fragment;  // part of the message
};

const json kCompletionBody = {{"model", "smollm"}, {"prompt", "Hello"}};
const json kChatBody = {{"model", "smollm"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};

json with(json body, const json& patch) {
  body.merge_patch(patch);
  return body;
}

// Fields both endpoints read the same way.
const std::vector<BadField> kSharedBadFields = {
    {{{"temperature", "1"}}, "temperature", "expected a number in [0, 2], but got a string"},
    {{{"temperature", -0.1}}, "temperature", "[0, 2]"},
    {{{"temperature", 2.5}}, "temperature", "got 2.5"},
    {{{"temperature", 1e300}}, "temperature", "[0, 2]"},
    {{{"top_p", 0}}, "top_p", "(0, 1]"},
    {{{"top_p", 1.5}}, "top_p", "(0, 1]"},
    {{{"top_p", true}}, "top_p", "got true"},
    {{{"top_k", -2}}, "top_k", "an integer between -1 and 2147483647"},
    {{{"top_k", 1.5}}, "top_k", "got 1.5"},
    {{{"top_k", "5"}}, "top_k", "a string"},
    {{{"top_k", 1e12}}, "top_k", "between -1"},
    {{{"min_p", -0.1}}, "min_p", "[0, 1]"},
    {{{"min_p", 1.1}}, "min_p", "[0, 1]"},
    {{{"repetition_penalty", 0}}, "repetition_penalty", "> 0"},
    {{{"repetition_penalty", -1}}, "repetition_penalty", "> 0"},
    {{{"repetition_penalty", 1e300}}, "repetition_penalty", "> 0"},
    {{{"frequency_penalty", 2.5}}, "frequency_penalty", "[-2, 2]"},
    {{{"frequency_penalty", -3}}, "frequency_penalty", "[-2, 2]"},
    {{{"frequency_penalty", json::array()}}, "frequency_penalty", "an array"},
    {{{"presence_penalty", 3}}, "presence_penalty", "[-2, 2]"},
    {{{"seed", 1.5}}, "seed", "an integer"},
    {{{"seed", "1"}}, "seed", "a string"},
    {{{"seed", 1e30}}, "seed", "2^64"},
    {{{"n", 0}}, "n", "an integer between 1 and 16"},
    {{{"n", 17}}, "n", "got 17"},
    {{{"n", 1.5}}, "n", "got 1.5"},
    {{{"n", "2"}}, "n", "a string"},
    {{{"n", 1e20}}, "n", "between 1 and 16"},
    {{{"n", 18446744073709551615ULL}}, "n", "between 1 and 16"},
    {{{"stop", ""}}, "stop", "a non-empty string"},
    {{{"stop", 5}}, "stop", "a string or an array of at most 4 strings"},
    {{{"stop", {"a", "b", "c", "d", "e"}}}, "stop", "at most 4"},
    {{{"stop", {"a", 1}}}, "stop[1]", "a string"},
    {{{"stop", {"a", ""}}}, "stop[1]", "a non-empty string"},
    {{{"stream", "true"}}, "stream", "a boolean"},
    {{{"stream", 1}}, "stream", "a boolean"},
    {{{"stream_options", {{"include_usage", true}}}},
     "stream_options",
     "only allowed when 'stream' is enabled"},
    {{{"stream", true}, {"stream_options", 5}}, "stream_options", "an object"},
    {{{"stream", true}, {"stream_options", {{"include_usage", "yes"}}}},
     "stream_options.include_usage",
     "a boolean"},
    {{{"ignore_eos", "no"}}, "ignore_eos", "a boolean"},
    {{{"skip_special_tokens", 0}}, "skip_special_tokens", "a boolean"},
    {{{"stop_token_ids", "x"}}, "stop_token_ids", "an array of token ids"},
    {{{"stop_token_ids", {1, 1000000000}}}, "stop_token_ids[1]", "a token id between 0 and"},
    {{{"stop_token_ids", {-1}}}, "stop_token_ids[0]", "a token id"},
    {{{"model", 5}}, "model", "a string"},
    {{{"echo", true}}, "echo", "not supported"},
    {{{"echo", "no"}}, "echo", "a boolean"},
    {{{"best_of", 2}}, "best_of", "must equal n"},
    {{{"suffix", "tail"}}, "suffix", "not supported"},
    {{{"logit_bias", {{"5", 10}}}}, "logit_bias", "not supported"},
    {{{"logit_bias", 5}}, "logit_bias", "an object"},
    {{{"functions", {{{"name", "f"}}}}}, "functions", "send 'tools'"},
    {{{"response_format", {{"type", "xml"}}}}, "response_format.type", "not one of"},
    {{{"response_format", 5}}, "response_format", "expected an object"},
    {{{"response_format", {{"type", "json_schema"}}}}, "response_format.json_schema", "Missing required"},
    {{{"response_format", {{"type", "json_object"}}}},
     "response_format",
     "not available"},  // no grammars here
    {{{"grammar", 7}}, "grammar", "GBNF text"},
};

TEST(OpenAiCompletionRequest, EveryBadFieldIsA400NamingIt) {
  std::vector<BadField> cases = kSharedBadFields;
  const std::vector<BadField> own = {
      {{{"max_tokens", 0}}, "max_tokens", "an integer >= 1"},
      {{{"max_tokens", -1}}, "max_tokens", "got -1"},
      {{{"max_tokens", 1.5}}, "max_tokens", "an integer >= 1"},
      {{{"max_tokens", "16"}}, "max_tokens", "a string"},
      {{{"logprobs", 21}}, "logprobs", "an integer between 0 and 20"},
      {{{"logprobs", -1}}, "logprobs", "between 0 and 20"},
      {{{"logprobs", true}}, "logprobs", "got true"},
      {{{"logprobs", 1.5}}, "logprobs", "got 1.5"},
      {{{"prompt", 5}}, "prompt", "a string or a non-empty array of strings, of token ids"},
      {{{"prompt", json::array()}}, "prompt", "a non-empty"},
      {{{"prompt", {1, "a"}}}, "prompt[1]", "a token id between 0 and 511"},
      {{{"prompt", {1, 2.5}}}, "prompt[1]", "got 2.5"},
      {{{"prompt", {-1}}}, "prompt[0]", "a token id"},
      {{{"prompt", {"a", 5}}}, "prompt[1]", "a string or a non-empty array of token ids"},
      {{{"prompt", {"a", json::array()}}}, "prompt[1]", "a non-empty array"},
      {{{"prompt", {json::array({1, 512})}}}, "prompt[0][1]", "between 0 and 511"},
      {{{"tools", {{{"type", "function"}}}}}, "tools", "for /v1/chat/completions"},
  };
  cases.insert(cases.end(), own.begin(), own.end());
  const ServedModel model = served();
  ASSERT_EQ(smollm().vocab_size(), 512);
  for (const BadField& c : cases) {
    SCOPED_TRACE(c.patch.dump());
    expect_bad_request([&] { parse_completion(with(kCompletionBody, c.patch), model); }, c.param, c.fragment);
  }
  expect_bad_request([&] { parse_completion({{"model", "smollm"}}, model); }, "prompt", "Missing required");
  expect_bad_request([&] { parse_completion(json::array({1}), model); }, "", "must be a JSON object");
}

TEST(OpenAiCompletionRequest, DefaultsAreOpenAis) {
  const ParsedRequest parsed = parse_completion({{"prompt", "Hello"}}, served());
  EXPECT_EQ(parsed.model, "smollm");
  EXPECT_EQ(parsed.n, 1);
  EXPECT_FALSE(parsed.options.stream);
  EXPECT_FALSE(parsed.options.include_usage);
  EXPECT_FALSE(parsed.options.logprobs);
  ASSERT_EQ(parsed.requests.size(), 1u);
  const EngineRequest& r = parsed.requests[0];
  EXPECT_EQ(r.prompt, encode("Hello"));
  EXPECT_EQ(r.max_tokens, 16);
  SamplingParams openai_defaults;  // SamplingParams' own, but temperature 1
  openai_defaults.temperature = 1.0f;
  expect_sampling(r.sampling, openai_defaults);
  EXPECT_EQ(r.sampling.vocab_limit, smollm().vocab_size());  // never an id the tokenizer cannot decode
  EXPECT_EQ(r.grammar, nullptr);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_TRUE(r.stop_token_ids.empty());
  EXPECT_FALSE(r.ignore_eos);
  EXPECT_TRUE(r.skip_special_tokens);
  EXPECT_EQ(r.top_logprobs, -1);

  // null means "default" too.
  const ParsedRequest nulls = parse_completion({{"prompt", "Hello"},
                                                {"temperature", nullptr},
                                                {"max_tokens", nullptr},
                                                {"n", nullptr},
                                                {"stop", nullptr}},
                                               served());
  EXPECT_EQ(nulls.requests.at(0).sampling.temperature, 1.0f);
  EXPECT_EQ(nulls.requests.at(0).max_tokens, 16);
}

TEST(OpenAiCompletionRequest, ValidFieldsReachTheEngineRequest) {
  const json body = {{"model", "smollm"},
                     {"prompt", "Hello"},
                     {"max_tokens", 8.0},
                     {"temperature", 0},
                     {"top_p", 0.5},
                     {"top_k", -1},
                     {"min_p", 0.25},
                     {"repetition_penalty", 1.5},
                     {"frequency_penalty", -2},
                     {"presence_penalty", 2},
                     {"seed", -1},
                     {"stop", "\n\n"},
                     {"stop_token_ids", {2, 0}},
                     {"ignore_eos", true},
                     {"skip_special_tokens", false},
                     {"logprobs", 3},
                     {"echo", false},
                     {"best_of", 1},
                     {"stream", true},
                     {"stream_options", {{"include_usage", true}}},
                     {"user", "someone"},
                     {"unknown_field", {{"anything", 1}}}};
  const ParsedRequest parsed = parse_completion(body, served());
  ASSERT_EQ(parsed.requests.size(), 1u);
  const EngineRequest& r = parsed.requests[0];
  EXPECT_EQ(r.max_tokens, 8);
  SamplingParams expected;
  expected.temperature = 0.0f;
  expected.top_p = 0.5f;
  expected.top_k = 0;  // -1 is off, as 0
  expected.min_p = 0.25f;
  expected.repetition_penalty = 1.5f;
  expected.frequency_penalty = -2.0f;
  expected.presence_penalty = 2.0f;
  expect_sampling(r.sampling, expected);
  EXPECT_EQ(r.sampling.seed, std::numeric_limits<uint64_t>::max());  // -1 modulo 2^64
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n\n"});
  EXPECT_EQ(r.stop_token_ids, (std::vector<int32_t>{2, 0}));
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_FALSE(r.skip_special_tokens);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_TRUE(parsed.options.logprobs);
  EXPECT_TRUE(parsed.options.stream);
  EXPECT_TRUE(parsed.options.include_usage);

  EXPECT_EQ(parse_completion(with(body, {{"top_k", 40}, {"seed", 18446744073709551615ULL}}), served())
                .requests.at(0)
                .sampling.top_k,
            40);
  EXPECT_EQ(
      parse_completion(with(body, {{"seed", 9007199254740992.0}}), served()).requests.at(0).sampling.seed,
      9007199254740992ULL);
  EXPECT_EQ(
      parse_completion(with(body, {{"stop", {"a", "b", "c", "d"}}}), served()).requests.at(0).stop.size(),
      4u);
}

TEST(OpenAiCompletionRequest, EveryPromptFormIsAccepted) {
  const ServedModel model = served();
  const auto prompts = [&](const json& prompt) {
    std::vector<std::vector<int32_t>> out;
    for (const EngineRequest& r : parse_completion({{"prompt", prompt}}, model).requests)
      out.push_back(r.prompt);
    return out;
  };
  using Prompts = std::vector<std::vector<int32_t>>;
  EXPECT_EQ(prompts("Hello world"), Prompts{encode("Hello world")});
  EXPECT_EQ(prompts({"Hello", "world"}), (Prompts{encode("Hello"), encode("world")}));
  EXPECT_EQ(prompts({5, 6, 7}), (Prompts{{5, 6, 7}}));
  EXPECT_EQ(prompts({json::array({5, 6}), json::array({7})}), (Prompts{{5, 6}, {7}}));
  EXPECT_EQ(prompts({"Hello", json::array({7})}), (Prompts{encode("Hello"), {7}}));
  // Special tokens written in the text are recognised, as Hugging Face's tokenizer(text) does.
  EXPECT_EQ(prompts("<|im_start|>"), Prompts{{*smollm().token_to_id("<|im_start|>")}});
  // SmolLM2 adds no BOS, so an empty string has no tokens.
  ASSERT_FALSE(smollm().adds_bos());
  expect_bad_request([&] { parse_completion({{"prompt", ""}}, model); }, "prompt", "no tokens");
  expect_bad_request([&] { parse_completion({{"prompt", {"a", ""}}}, model); }, "prompt[1]", "no tokens");

  ServedModel two = served();
  two.limits.max_prompts = 2;
  expect_bad_request(
      [&] {
        parse_completion({{"prompt", {"a", "b", "c"}}}, two);
      },
      "prompt", "at most 2 prompts");
}

TEST(OpenAiCompletionRequest, ChoicesArePromptMajorWithConsecutiveSeeds) {
  const ParsedRequest parsed = parse_completion(
      {{"prompt", {"Hello", "world"}}, {"n", 3}, {"seed", 10}, {"temperature", 0.7}}, served());
  EXPECT_EQ(parsed.n, 3);
  ASSERT_EQ(parsed.requests.size(), 6u);
  for (size_t k = 0; k < 6; ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(parsed.requests[k].prompt, encode(k < 3 ? "Hello" : "world"));
    EXPECT_EQ(parsed.requests[k].sampling.seed, 10 + k);
    EXPECT_EQ(parsed.requests[k].sampling.temperature, 0.7f);
  }

  // Without a seed every choice still gets its own.
  const ParsedRequest unseeded = parse_completion({{"prompt", {"Hello", "world"}}, {"n", 16}}, served());
  std::set<uint64_t> seeds;
  for (const EngineRequest& r : unseeded.requests) seeds.insert(r.sampling.seed);
  EXPECT_EQ(seeds.size(), 32u);
}

TEST(OpenAiCompletionRequest, PromptFillingTheContextIsRefused) {
  const ServedModel model = served(8);
  const ApiError error = error_of([&] { parse_completion({{"prompt", {1, 2, 3, 4, 5, 6, 7, 8}}}, model); });
  EXPECT_EQ(error.status, 400);
  EXPECT_EQ(error.param, "prompt");
  EXPECT_EQ(error.code, "context_length_exceeded");
  EXPECT_EQ(
      error.message,
      "This model's maximum context length is 8 tokens. However, you requested 8 tokens in the prompt, which "
      "leaves no room for the completion. Please reduce the length of the prompt.");
  // Any prompt of several that is too long refuses the whole request.
  EXPECT_EQ(
      error_of([&] {
        parse_completion({{"prompt", {json::array({1}), json::array({1, 2, 3, 4, 5, 6, 7, 8, 9})}}}, model);
      }).code,
      "context_length_exceeded");
}

TEST(OpenAiCompletionRequest, MaxTokensOverTheRoomLeftIs400UnlessClamping) {
  ServedModel model = served(8);
  const auto parse = [&](const json& max_tokens) {
    return parse_completion({{"prompt", {1, 2, 3, 4, 5}}, {"max_tokens", max_tokens}}, model);
  };
  EXPECT_EQ(parse(3).requests.at(0).max_tokens, 3);
  for (const json& huge : {json(4), json(1e30), json(18446744073709551615ULL), json::parse("1e19")}) {
    SCOPED_TRACE(huge.dump());
    const ApiError error = error_of([&] { parse(huge); });
    EXPECT_EQ(error.status, 400);
    EXPECT_EQ(error.code, "context_length_exceeded");
    EXPECT_EQ(error.param, "max_tokens");
    EXPECT_NE(error.message.find("which leaves 3"), std::string::npos) << error.message;
  }
  model.limits.clamp_max_tokens = true;
  for (const json& huge : {json(4), json(1e30), json(18446744073709551615ULL)})
    EXPECT_EQ(parse(huge).requests.at(0).max_tokens, 3);
  // The default 16 is no request: it is cut to the room left, per prompt.
  const ParsedRequest two =
      parse_completion({{"prompt", {json::array({1}), json::array({1, 2, 3, 4, 5, 6, 7})}}}, served(20));
  EXPECT_EQ(two.requests.at(0).max_tokens, 16);
  EXPECT_EQ(two.requests.at(1).max_tokens, 13);
}

TEST(OpenAiRequest, UnknownModelIs404) {
  const ApiError error = error_of([] { parse_completion({{"model", "gpt-4"}, {"prompt", "x"}}, served()); });
  EXPECT_EQ(error.status, 404);
  EXPECT_EQ(error.type, "not_found_error");
  EXPECT_EQ(error.code, "model_not_found");
  EXPECT_EQ(error.param, "model");
  EXPECT_NE(error.message.find("'gpt-4' does not exist"), std::string::npos) << error.message;
  EXPECT_EQ(error_of([] { parse_chat(with(kChatBody, {{"model", "x"}}), served()); }).status, 404);
  EXPECT_EQ(error_of([] { parse_tokenize({{"model", "x"}, {"prompt", "a"}}, served()); }).status, 404);
  EXPECT_EQ(error_of([] { parse_detokenize({{"model", "x"}, {"tokens", {1}}}, served()); }).status, 404);
  // A long name is cut in the message.
  const ApiError long_name = error_of([] {
    parse_completion({{"model", std::string(10000, 'x')}, {"prompt", "x"}}, served());
  });
  EXPECT_LT(long_name.message.size(), 400u);
}

TEST(OpenAiRequest, AnAdaptersNameRunsTheRequestWithIt) {
  ServedModel model = served();
  model.adapters = {"sql", "poems"};
  const ParsedRequest sql = parse_completion({{"model", "sql"}, {"prompt", "x"}, {"n", 2}}, model);
  EXPECT_EQ(sql.model, "sql");
  ASSERT_EQ(sql.requests.size(), 2u);
  for (const EngineRequest& r : sql.requests) EXPECT_EQ(r.adapter, 0);
  const ParsedRequest poems = parse_chat(with(kChatBody, {{"model", "poems"}}), model);
  EXPECT_EQ(poems.model, "poems");
  EXPECT_EQ(poems.requests.at(0).adapter, 1);
  for (const json& body : {json{{"model", "smollm"}, {"prompt", "x"}}, json{{"prompt", "x"}}}) {
    const ParsedRequest base = parse_completion(body, model);
    EXPECT_EQ(base.model, "smollm");
    EXPECT_EQ(base.requests.at(0).adapter, -1);
  }
  const EmbeddingRequest embedding = parse_embeddings({{"model", "poems"}, {"input", "x"}}, model);
  EXPECT_EQ(embedding.model, "poems");
  EXPECT_EQ(embedding.adapter, 1);
  EXPECT_EQ(parse_tokenize({{"model", "sql"}, {"prompt", "a"}}, model), encode("a"));
  const ApiError unknown = error_of([&] { parse_completion({{"model", "SQL"}, {"prompt", "x"}}, model); });
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(unknown.message.find("serves 'smollm', 'sql', 'poems'"), std::string::npos) << unknown.message;
}

TEST(OpenAiChatRequest, EveryBadFieldIsA400NamingIt) {
  std::vector<BadField> cases = kSharedBadFields;
  const std::vector<BadField> own = {
      {{{"max_tokens", 0}}, "max_tokens", "an integer >= 1"},
      {{{"max_completion_tokens", 0}}, "max_completion_tokens", "an integer >= 1"},
      {{{"max_completion_tokens", "8"}}, "max_completion_tokens", "a string"},
      {{{"logprobs", 1}}, "logprobs", "a boolean"},
      {{{"top_logprobs", 3}}, "top_logprobs", "requires 'logprobs' to be true"},
      {{{"logprobs", false}, {"top_logprobs", 3}}, "top_logprobs", "requires 'logprobs' to be true"},
      {{{"logprobs", true}, {"top_logprobs", 21}}, "top_logprobs", "an integer between 0 and 20"},
      {{{"logprobs", true}, {"top_logprobs", "3"}}, "top_logprobs", "a string"},
      {{{"messages", json::array()}}, "messages", "a non-empty array of messages"},
      {{{"messages", "Hi"}}, "messages", "a non-empty array"},
      {{{"messages", {5}}}, "messages[0]", "an object"},
      {{{"messages", {{{"content", "x"}}}}}, "messages[0].role", "Missing required parameter"},
      {{{"messages", {{{"role", 1}, {"content", "x"}}}}}, "messages[0].role", "a string"},
      {{{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}, "messages[0].role", "but got 'wizard'"},
      {{{"messages", {{{"role", "user"}}}}}, "messages[0].content", "Missing required parameter"},
      {{{"messages", {{{"role", "user"}, {"content", nullptr}}}}}, "messages[0].content", "Missing required"},
      {{{"messages", {{{"role", "user"}, {"content", "a"}}, {{"role", "user"}, {"content", 5}}}}},
       "messages[1].content",
       "a string or an array of content parts"},
      {{{"messages", {{{"role", "user"}, {"content", {5}}}}}}, "messages[0].content[0]", "an object"},
      {{{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}},
       "messages[0].content[0].type",
       "only \"text\""},
      {{{"messages", {{{"role", "user"}, {"content", {{{"type", "text"}}}}}}}},
       "messages[0].content[0].text",
       "Missing required"},
      {{{"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", 5}}}}}}}},
       "messages[0].content[0].text",
       "a string"},
      {{{"tools", {{{"type", "function"}}}}}, "tools[0].function", "Missing required"},
      {{{"tool_choice", "required"}}, "tool_choice", "needs 'tools'"},
      {{{"messages",
         {{{"role", "assistant"}, {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", "{x"}}}}}}}}}},
       "messages[0].tool_calls[0].function.arguments",
       "not JSON"},
  };
  cases.insert(cases.end(), own.begin(), own.end());
  const ServedModel model = served();
  for (const BadField& c : cases) {
    SCOPED_TRACE(c.patch.dump());
    expect_bad_request([&] { parse_chat(with(kChatBody, c.patch), model); }, c.param, c.fragment);
  }
  expect_bad_request([&] { parse_chat({{"model", "smollm"}}, model); }, "messages", "Missing required");
}

TEST(OpenAiChatRequest, MessagesAreRenderedWithTheChatTemplate) {
  const json body = {
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}},
        {{"role", "user"}, {"content", "Hi"}},
        {{"role", "assistant"}, {"content", "Hello!"}},
        {{"role", "user"},
         {"content", {{{"type", "text"}, {"text", "Two"}}, {{"type", "text"}, {"text", "parts"}}}}}}}};
  const ParsedRequest parsed = parse_chat(body, served());
  ASSERT_EQ(parsed.requests.size(), 1u);

  const std::vector<ChatMessage> messages = {
      {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Two\nparts"}};
  ChatTemplateOptions options;
  options.add_generation_prompt = true;
  options.bos_token = smollm().bos_token();
  options.eos_token = smollm().eos_token();
  const std::string rendered = ChatTemplate(smollm().chat_template()).render(messages, options);
  EXPECT_EQ(parsed.requests[0].prompt, encode(rendered, /*add_special_tokens=*/false));
  EXPECT_EQ(smollm().decode(parsed.requests[0].prompt),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
            "Hello!<|im_end|>\n<|im_start|>user\nTwo\nparts<|im_end|>\n<|im_start|>assistant\n");

  // Without a system message the template adds its own.
  EXPECT_EQ(
      smollm().decode(parse_chat(kChatBody, served()).requests.at(0).prompt),
      "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(OpenAiChatRequest, DefaultsAndLogprobs) {
  const ServedModel model = served();
  const ParsedRequest parsed = parse_chat(kChatBody, model);
  const EngineRequest& r = parsed.requests.at(0);
  // No max_tokens: the room left in the context, not a clamp.
  EXPECT_EQ(r.max_tokens, model.context_length - static_cast<int64_t>(r.prompt.size()));
  EXPECT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_EQ(r.top_logprobs, -1);
  EXPECT_FALSE(parsed.options.logprobs);

  const ParsedRequest logprobs = parse_chat(with(kChatBody, {{"logprobs", true}}), model);
  EXPECT_TRUE(logprobs.options.logprobs);
  EXPECT_EQ(logprobs.requests.at(0).top_logprobs, 0);
  EXPECT_EQ(parse_chat(with(kChatBody, {{"logprobs", true}, {"top_logprobs", 20}}), model)
                .requests.at(0)
                .top_logprobs,
            20);

  // max_completion_tokens wins over the older max_tokens.
  EXPECT_EQ(parse_chat(with(kChatBody, {{"max_tokens", 5}, {"max_completion_tokens", 7}}), model)
                .requests.at(0)
                .max_tokens,
            7);
  EXPECT_EQ(parse_chat(with(kChatBody, {{"max_tokens", 5}}), model).requests.at(0).max_tokens, 5);
  const ParsedRequest n = parse_chat(with(kChatBody, {{"n", 4}, {"seed", 3}}), model);
  ASSERT_EQ(n.requests.size(), 4u);
  EXPECT_EQ(n.requests[3].sampling.seed, 6u);
  EXPECT_EQ(n.requests[3].prompt, r.prompt);
}

TEST(OpenAiChatRequest, LongConversationsAndTemplatesWithoutOrFailingAreRefused) {
  const ApiError overflow = error_of([] {
    parse_chat(with(kChatBody, {{"messages", {{{"role", "user"}, {"content", std::string(500, 'a')}}}}}),
               served(64));
  });
  EXPECT_EQ(overflow.code, "context_length_exceeded");
  EXPECT_EQ(overflow.param, "messages");
  EXPECT_NE(overflow.message.find("maximum context length is 64 tokens"), std::string::npos);

  const ApiError too_long = error_of([] {
    parse_chat(with(kChatBody, {{"max_completion_tokens", 1000}}), served(100));
  });
  EXPECT_EQ(too_long.code, "context_length_exceeded");
  EXPECT_EQ(too_long.param, "max_completion_tokens");

  ServedModel without = served();
  without.chat_template.reset();
  expect_bad_request([&] { parse_chat(kChatBody, without); }, "messages", "has no chat template");

  ServedModel raising = served();
  raising.chat_template = ChatTemplate("{{ raise_exception('roles must alternate') }}");
  expect_bad_request([&] { parse_chat(kChatBody, raising); }, "messages", "roles must alternate");
}

TEST(OpenAiTokenize, PromptsAndMessages) {
  const ServedModel model = served();
  EXPECT_EQ(parse_tokenize({{"prompt", "Hello world"}}, model), encode("Hello world"));
  EXPECT_EQ(parse_tokenize({{"model", "smollm"}, {"prompt", "Hello"}, {"add_special_tokens", false}}, model),
            encode("Hello", false));
  const json messages = kChatBody["messages"];
  EXPECT_EQ(parse_tokenize({{"messages", messages}}, model),
            parse_chat(kChatBody, model).requests.at(0).prompt);
  const std::vector<int32_t> no_prompt =
      parse_tokenize({{"messages", messages}, {"add_generation_prompt", false}}, model);
  EXPECT_EQ(smollm().decode(no_prompt).find("<|im_start|>assistant"), std::string::npos);

  expect_bad_request([&] { parse_tokenize(json::object(), model); }, "prompt", "Missing required");
  expect_bad_request([&] { parse_tokenize({{"prompt", 5}}, model); }, "prompt", "a string");
  expect_bad_request(
      [&] {
        parse_tokenize({{"prompt", "a"}, {"add_special_tokens", 1}}, model);
      },
      "add_special_tokens", "a boolean");
  expect_bad_request(
      [&] {
        parse_tokenize({{"messages", messages}, {"add_generation_prompt", "no"}}, model);
      },
      "add_generation_prompt", "a boolean");

  EXPECT_EQ(parse_detokenize({{"tokens", {1, 2, 3}}}, model), (std::vector<int32_t>{1, 2, 3}));
  expect_bad_request([&] { parse_detokenize(json::object(), model); }, "tokens", "Missing required");
  expect_bad_request(
      [&] {
        parse_detokenize({{"tokens", "abc"}}, model);
      },
      "tokens", "an array of token ids");
  expect_bad_request(
      [&] {
        parse_detokenize({{"tokens", {1, 512}}}, model);
      },
      "tokens[1]", "between 0 and 511");
}

TEST(OpenAiJsonBody, InvalidBodiesAre400) {
  EXPECT_EQ(parse_json_body(R"({"a": "\u00e9", "b": [1]})")["a"], "\u00e9");
  const std::vector<std::string> bad = {
      "",
      "{",
      "{\"a\": 1,}",
      "[1, 2]",
      "\"text\"",
      "{\"a\": \"\xff\"}",          // invalid UTF-8
      "{\"a\": \"\xc0\xaf\"}",      // overlong encoding
      "{\"a\": \"\xed\xa0\x80\"}",  // an encoded surrogate
      R"({"a": "\ud800"})",         // a lone surrogate escape
      "{\"\xfe\": 1}",              // invalid UTF-8 in a key
      R"({"a": 1e400})",            // beyond double
  };
  for (const std::string& body : bad) {
    SCOPED_TRACE(body);
    expect_bad_request([&] { parse_json_body(body); }, "", "could not parse the JSON body");
  }
}

TEST(OpenAiJsonBody, DeepNestingIsHarmless) {
  // nlohmann parses and destroys iteratively; unknown fields are ignored however deep.
  constexpr size_t kDepth = 200000;
  const std::string body =
      R"({"prompt": "Hi", "junk": )" + std::string(kDepth, '[') + std::string(kDepth, ']') + "}";
  EXPECT_EQ(parse_completion(parse_json_body(body), served()).requests.size(), 1u);
}

}  // namespace
}  // namespace tokenmill
