#include "serve/openai_request.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <unordered_set>

#include "serve/request_fields.h"
#include "serve/structured_output.h"
#include "serve/tool_calls.h"

namespace tokenmill {

namespace {

using nlohmann::json;

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

// How a value is shown in a message: numbers and booleans as written, others by their type
// (client strings are not echoed).
std::string shown(const json& value) {
  switch (value.type()) {
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::null: return "null";
    default: return value.dump();
  }
}

[[noreturn]] void fail_expected(const std::string& param, std::string_view expected, const json& value) {
  fail_request(param, "Invalid '{}': expected {}, but got {} instead.", param, expected, shown(value));
}

// A client string quoted in a message: at most 256 bytes, cut at a UTF-8 character boundary.
std::string excerpt(std::string_view text) {
  constexpr size_t kMax = 256;
  if (text.size() <= kMax) return std::string(text);
  size_t end = kMax;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return std::string(text.substr(0, end)) + "...";
}

void require_object(const json& body) {
  if (!body.is_object()) fail_request("", "The request body must be a JSON object, got {}.", shown(body));
}

// An integral number (16 or 16.0) saturated to the int64 range; nullopt for anything else.
std::optional<int64_t> integral(const json& value) {
  if (value.is_number_unsigned())
    return static_cast<int64_t>(std::min<uint64_t>(value.get<uint64_t>(), kMaxInt64));
  if (value.is_number_integer()) return value.get<int64_t>();
  if (!value.is_number_float()) return std::nullopt;
  const double d = value.get<double>();
  if (!std::isfinite(d) || d != std::floor(d)) return std::nullopt;
  if (d >= 0x1p63) return kMaxInt64;
  if (d < -0x1p63) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(d);
}

std::string integer_range(int64_t lo, int64_t hi) {
  return hi == kMaxInt64 ? fmt::format("an integer >= {}", lo)
                         : fmt::format("an integer between {} and {}", lo, hi);
}

int64_t read_integer(const json& value, const std::string& param, int64_t lo, int64_t hi) {
  const std::optional<int64_t> i = integral(value);
  if (!i || *i < lo || *i > hi) fail_expected(param, integer_range(lo, hi), value);
  return *i;
}

// A number for which `valid` holds; `expected` describes the range ("a number in [0, 2]").
float read_float(const json& value, const std::string& param, std::string_view expected,
                 bool (*valid)(double)) {
  if (!value.is_number() || !valid(value.get<double>())) fail_expected(param, expected, value);
  return static_cast<float>(value.get<double>());
}

bool read_bool(const json& value, const std::string& param) {
  if (!value.is_boolean()) fail_expected(param, "a boolean", value);
  return value.get<bool>();
}

const std::string& read_string(const json& value, const std::string& param) {
  if (!value.is_string()) fail_expected(param, "a string", value);
  return value.get_ref<const std::string&>();
}

int32_t read_token_id(const json& value, const std::string& param, const Tokenizer& tokenizer) {
  const int64_t vocab = tokenizer.vocab_size();
  const std::optional<int64_t> id = integral(value);
  if (!id || *id < 0 || *id >= vocab)
    fail_expected(param, fmt::format("a token id between 0 and {}", vocab - 1), value);
  return static_cast<int32_t>(*id);
}

std::vector<int32_t> read_token_ids(const json& value, const std::string& param, const Tokenizer& tokenizer) {
  if (!value.is_array()) fail_expected(param, "an array of token ids", value);
  std::vector<int32_t> ids;
  ids.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i)
    ids.push_back(read_token_id(value[i], fmt::format("{}[{}]", param, i), tokenizer));
  return ids;
}

// A seed: any integer in [-2^63, 2^64); negative seeds are taken modulo 2^64.
uint64_t read_seed(const json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer()) return static_cast<uint64_t>(value.get<int64_t>());
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (d == std::floor(d) && d >= -0x1p63 && d < 0x1p64)
      return d < 0 ? static_cast<uint64_t>(static_cast<int64_t>(d)) : static_cast<uint64_t>(d);
  }
  fail_expected("seed", "an integer between -2^63 and 2^64 - 1", value);
}

// The adapter `model` (optional) names: -1 for the served model itself, else the index of one
// of its LoRA adapters; 404 for any other name.
int32_t requested_adapter(const json& body, const ServedModel& model) {
  const json* name = field(body, "model");
  if (name == nullptr) return -1;
  const std::string& requested = read_string(*name, "model");
  if (requested == model.id) return -1;
  const auto found = std::find(model.adapters.begin(), model.adapters.end(), requested);
  if (found != model.adapters.end()) return static_cast<int32_t>(found - model.adapters.begin());
  constexpr size_t kListed = 8;  // names in the message at most
  std::string served = fmt::format("'{}'", model.id);
  for (size_t i = 0; i < std::min(model.adapters.size(), kListed); ++i)
    served += fmt::format(", '{}'", model.adapters[i]);
  if (model.adapters.size() > kListed)
    served += fmt::format(" and {} more adapters", model.adapters.size() - kListed);
  throw ApiException(api_error(
      404, fmt::format("The model '{}' does not exist: this server serves {}.", excerpt(requested), served),
      "model", "model_not_found"));
}

// The name responses echo for a request run with `adapter`.
const std::string& served_name(const ServedModel& model, int32_t adapter) {
  return adapter < 0 ? model.id : model.adapters[static_cast<size_t>(adapter)];
}

void refuse_if(bool condition, const std::string& param, std::string_view why) {
  if (condition) fail_request(param, "Unsupported '{}': {}.", param, why);
}

// Known OpenAI fields whose feature tokenmill lacks: refused rather than silently ignored.
void refuse_unsupported(const json& body, int32_t n) {
  if (const json* echo = field(body, "echo"))
    refuse_if(read_bool(*echo, "echo"), "echo", "echo: true is not supported (send false or leave it out)");
  if (const json* best_of = field(body, "best_of"))
    refuse_if(read_integer(*best_of, "best_of", 1, kMaxInt64) != n, "best_of",
              "best_of must equal n (tokenmill does not rank candidates)");
  if (const json* suffix = field(body, "suffix"))
    refuse_if(!read_string(*suffix, "suffix").empty(), "suffix", "suffix (insertion) is not supported");
  if (const json* bias = field(body, "logit_bias")) {
    if (!bias->is_object()) fail_expected("logit_bias", "an object", *bias);
    refuse_if(!bias->empty(), "logit_bias", "logit_bias is not supported");
  }
  if (const json* functions = field(body, "functions"))
    refuse_if(!functions->empty(), "functions", "the legacy 'functions' are not supported: send 'tools'");
}

// The fields both generation endpoints share, read into a template engine request.
struct GenerationFields {
  EngineRequest request;  // everything but prompt, max_tokens and seed
  std::optional<uint64_t> seed;
  int32_t n = 1;
  ResponseOptions options;
};

std::vector<std::string> read_stop(const json& value, int32_t max_stop) {
  if (value.is_string()) {
    if (value.get_ref<const std::string&>().empty()) fail_expected("stop", "a non-empty string", value);
    return {value.get<std::string>()};
  }
  if (!value.is_array() || value.size() > static_cast<size_t>(max_stop))
    fail_expected("stop", fmt::format("a string or an array of at most {} strings", max_stop), value);
  std::vector<std::string> stop;
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string param = fmt::format("stop[{}]", i);
    if (read_string(value[i], param).empty()) fail_expected(param, "a non-empty string", value[i]);
    stop.push_back(value[i].get<std::string>());
  }
  return stop;
}

// The sampling fields but the seed.
SamplingParams read_sampling(const json& body) {
  SamplingParams s;
  s.temperature = 1.0f;  // OpenAI's default
  const auto number = [&](const char* key, float& into, std::string_view expected, bool (*valid)(double)) {
    if (const json* v = field(body, key)) into = read_float(*v, key, expected, valid);
  };
  number("temperature", s.temperature, "a number in [0, 2]", [](double x) { return x >= 0 && x <= 2; });
  number("top_p", s.top_p, "a number in (0, 1]", [](double x) { return x > 0 && x <= 1; });
  number("min_p", s.min_p, "a number in [0, 1]", [](double x) { return x >= 0 && x <= 1; });
  number("repetition_penalty", s.repetition_penalty, "a number > 0",
         [](double x) { return x > 0 && x <= static_cast<double>(FLT_MAX); });
  number("frequency_penalty", s.frequency_penalty, "a number in [-2, 2]",
         [](double x) { return x >= -2 && x <= 2; });
  number("presence_penalty", s.presence_penalty, "a number in [-2, 2]",
         [](double x) { return x >= -2 && x <= 2; });
  if (const json* v = field(body, "top_k"))
    s.top_k = static_cast<int32_t>(std::max<int64_t>(0, read_integer(*v, "top_k", -1, INT32_MAX)));
  return s;
}

GenerationFields read_generation_fields(const json& body, std::string_view raw_body,
                                        const ServedModel& model) {
  GenerationFields out;
  out.request.grammar = read_output_grammar(body, raw_body, model);
  out.request.sampling = read_sampling(body);
  // Models may have more embedding rows than the tokenizer has tokens: never sample those.
  out.request.sampling.vocab_limit = model.tokenizer.vocab_size();
  if (const json* v = field(body, "seed")) out.seed = read_seed(*v);

  if (const json* v = field(body, "n"))
    out.n = static_cast<int32_t>(read_integer(*v, "n", 1, model.limits.max_n));
  if (const json* v = field(body, "stop")) out.request.stop = read_stop(*v, model.limits.max_stop);
  if (const json* v = field(body, "stop_token_ids"))
    out.request.stop_token_ids = read_token_ids(*v, "stop_token_ids", model.tokenizer);
  if (const json* v = field(body, "ignore_eos")) out.request.ignore_eos = read_bool(*v, "ignore_eos");
  if (const json* v = field(body, "skip_special_tokens"))
    out.request.skip_special_tokens = read_bool(*v, "skip_special_tokens");

  if (const json* v = field(body, "stream")) out.options.stream = read_bool(*v, "stream");
  if (const json* v = field(body, "stream_options")) {
    if (!out.options.stream)
      fail_request("stream_options",
                   "The 'stream_options' parameter is only allowed when 'stream' is enabled.");
    if (!v->is_object()) fail_expected("stream_options", "an object", *v);
    if (const json* usage = field(*v, "include_usage"))
      out.options.include_usage = read_bool(*usage, "stream_options.include_usage");
  }
  refuse_unsupported(body, out.n);
  return out;
}

// Seeds for `count` choices: seed, seed + 1, ... when the client gave one, else distinct
// random seeds.
std::vector<uint64_t> choice_seeds(const std::optional<uint64_t>& seed, size_t count) {
  std::vector<uint64_t> seeds;
  if (seed) {
    for (size_t i = 0; i < count; ++i) seeds.push_back(*seed + i);
    return seeds;
  }
  std::random_device device;
  std::unordered_set<uint64_t> used;
  while (seeds.size() < count) {
    const uint64_t s = (static_cast<uint64_t>(device()) << 32) ^ device();
    if (used.insert(s).second) seeds.push_back(s);
  }
  return seeds;
}

// The completion length a request asked for: `requested` as the client sent it in the field
// `param`, else `fallback` cut to the room left (unset: the room left).
struct MaxTokens {
  std::optional<int64_t> requested;
  std::string param;
  std::optional<int64_t> fallback;
};

// One engine request per prompt x choice.
ParsedRequest plan(const std::vector<std::vector<int32_t>>& prompts, GenerationFields fields,
                   const MaxTokens& max_tokens, const std::string& prompt_param, const ServedModel& model) {
  ParsedRequest out;
  out.model = served_name(model, fields.request.adapter);
  out.n = fields.n;
  out.options = fields.options;
  const std::vector<uint64_t> seeds =
      choice_seeds(fields.seed, prompts.size() * static_cast<size_t>(fields.n));
  for (const std::vector<int32_t>& prompt : prompts) {
    const auto length = static_cast<int64_t>(prompt.size());
    if (length >= model.context_length)
      throw ApiException(
          api_error(400,
                    fmt::format("This model's maximum context length is {} tokens. However, you "
                                "requested {} tokens in the prompt, which leaves no room for the "
                                "completion. Please reduce the length of the prompt.",
                                model.context_length, length),
                    prompt_param, "context_length_exceeded"));
    const int64_t room = model.context_length - length;
    const std::optional<int64_t>& requested = max_tokens.requested;
    if (requested && *requested > room && !model.limits.clamp_max_tokens)
      throw ApiException(
          api_error(400,
                    fmt::format("This model's maximum context length is {} tokens. However, you "
                                "requested {} tokens for the completion, and the {} already use {}, which "
                                "leaves {}. Please reduce '{}' or the length of the {}.",
                                model.context_length, *requested, prompt_param, length, room,
                                max_tokens.param, prompt_param),
                    max_tokens.param, "context_length_exceeded"));
    for (int32_t i = 0; i < fields.n; ++i) {
      EngineRequest request = fields.request;
      request.prompt = prompt;
      request.max_tokens = std::min(requested.value_or(max_tokens.fallback.value_or(room)), room);
      request.sampling.seed = seeds[out.requests.size()];
      out.requests.push_back(std::move(request));
    }
  }
  return out;
}

std::optional<int64_t> read_max_tokens(const json& body, const char* key) {
  if (const json* v = field(body, key)) return read_integer(*v, key, 1, kMaxInt64);
  return std::nullopt;
}

std::vector<int32_t> tokenize_prompt(const std::string& text, const std::string& param,
                                     const Tokenizer& tokenizer) {
  std::vector<int32_t> ids = tokenizer.encode(text, {.add_special_tokens = true, .parse_special = true});
  if (ids.empty()) fail_request(param, "Invalid '{}': the prompt has no tokens.", param);
  return ids;
}

}  // namespace

std::vector<std::vector<int32_t>> read_prompt_list(const json& body, const std::string& key,
                                                   const ServedModel& model) {
  const json* prompt = field(body, key);
  if (prompt == nullptr) fail_request(key, "Missing required parameter: '{}'.", key);
  if (prompt->is_string()) return {tokenize_prompt(prompt->get<std::string>(), key, model.tokenizer)};
  if (!prompt->is_array() || prompt->empty())
    fail_expected(key, "a string or a non-empty array of strings, of token ids or of arrays of token ids",
                  *prompt);
  if (prompt->front().is_number()) {
    std::vector<int32_t> ids = read_token_ids(*prompt, key, model.tokenizer);
    return {std::move(ids)};
  }
  if (prompt->size() > static_cast<size_t>(model.limits.max_prompts))
    fail_request(key, "Invalid '{}': at most {} prompts per request, got {}.", key, model.limits.max_prompts,
                 prompt->size());
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < prompt->size(); ++i) {
    const json& item = (*prompt)[i];
    const std::string param = fmt::format("{}[{}]", key, i);
    if (item.is_string()) {
      prompts.push_back(tokenize_prompt(item.get<std::string>(), param, model.tokenizer));
    } else if (item.is_array() && !item.empty()) {
      prompts.push_back(read_token_ids(item, param, model.tokenizer));
    } else {
      fail_expected(param, "a string or a non-empty array of token ids", item);
    }
  }
  return prompts;
}

namespace {

// The text of one message's content: a string, or text parts joined with "\n".
std::string message_content(const json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) fail_expected(param, "a string or an array of content parts", content);
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string part_param = fmt::format("{}[{}]", param, i);
    const json& part = content[i];
    if (!part.is_object()) fail_expected(part_param, "an object {\"type\": \"text\", \"text\": ...}", part);
    const json* type = field(part, "type");
    if (type == nullptr || *type != "text")
      fail_request(part_param + ".type", "Invalid '{}.type': only \"text\" content parts are supported.",
                   part_param);
    const json* part_text = field(part, "text");
    if (part_text == nullptr)
      fail_request(part_param + ".text", "Missing required parameter: '{}.text'.", part_param);
    if (i > 0) text += '\n';
    text += read_string(*part_text, part_param + ".text");
  }
  return text;
}

// An assistant message's tool_calls as chat templates read them (as vLLM passes them):
// function.arguments parsed from the JSON text OpenAI clients send.
json template_tool_calls(const json& calls, const std::string& param) {
  if (!calls.is_array()) fail_expected(param, "an array of tool calls", calls);
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string call_param = fmt::format("{}[{}]", param, i);
    const json& call = calls[i];
    const json* function = call.is_object() ? field(call, "function") : nullptr;
    const json* name = function != nullptr && function->is_object() ? field(*function, "name") : nullptr;
    if (name == nullptr)
      fail_request(call_param + ".function.name", "Missing required parameter: '{}.function.name'.",
                   call_param);
    json arguments = json::object();
    if (const json* a = field(*function, "arguments")) {
      arguments =
          a->is_string() ? json::parse(a->get<std::string>(), nullptr, /*allow_exceptions=*/false) : *a;
      if (arguments.is_discarded())
        fail_request(call_param + ".function.arguments", "Invalid '{}.function.arguments': not JSON text.",
                     call_param);
    }
    json kept = {{"type", "function"},
                 {"function",
                  {{"name", read_string(*name, call_param + ".function.name")}, {"arguments", arguments}}}};
    if (const json* id = field(call, "id")) kept["id"] = read_string(*id, call_param + ".id");
    out.push_back(std::move(kept));
  }
  return out;
}

// `messages` as {role, content} objects (and tool_calls, tool_call_id, name), validated.
json read_messages(const json& body) {
  const json* messages = field(body, "messages");
  if (messages == nullptr) fail_request("messages", "Missing required parameter: 'messages'.");
  if (!messages->is_array() || messages->empty())
    fail_expected("messages", "a non-empty array of messages", *messages);
  json out = json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& message = (*messages)[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!message.is_object()) fail_expected(param, "an object {\"role\": ..., \"content\": ...}", message);
    const json* role = field(message, "role");
    if (role == nullptr) fail_request(param + ".role", "Missing required parameter: '{}.role'.", param);
    const std::string& name = read_string(*role, param + ".role");
    if (name != "system" && name != "developer" && name != "user" && name != "assistant" && name != "tool")
      fail_request(
          param + ".role",
          "Invalid '{}.role': expected one of system, developer, user, assistant, tool, but got '{}'.", param,
          excerpt(name));
    json kept = {{"role", name}};
    const json* calls = name == "assistant" ? field(message, "tool_calls") : nullptr;
    if (calls != nullptr) kept["tool_calls"] = template_tool_calls(*calls, param + ".tool_calls");
    const json* content = field(message, "content");
    if (content == nullptr && calls == nullptr)
      fail_request(param + ".content", "Missing required parameter: '{}.content'.", param);
    if (content != nullptr) kept["content"] = message_content(*content, param + ".content");
    for (const char* key : {"tool_call_id", "name"})
      if (const json* v = field(message, key)) kept[key] = read_string(*v, fmt::format("{}.{}", param, key));
    out.push_back(std::move(kept));
  }
  return out;
}

// The messages rendered with the chat template and tokenized.
std::vector<int32_t> chat_prompt(const json& body, const ServedModel& model, bool add_generation_prompt,
                                 bool add_special_tokens, const nlohmann::ordered_json& extra = {}) {
  const json messages = read_messages(body);
  if (!model.chat_template)
    fail_request("messages",
                 "The model '{}' has no chat template: use /v1/completions with a prompt instead.", model.id);
  ChatTemplateOptions options;
  options.add_generation_prompt = add_generation_prompt;
  options.bos_token = model.tokenizer.bos_token();
  options.eos_token = model.tokenizer.eos_token();
  std::string text;
  try {
    text = extra.is_null()
               ? model.chat_template->render_json(messages, options)
               : model.chat_template->render_ordered(nlohmann::ordered_json(messages), extra, options);
  } catch (const Error& e) {
    fail_request("messages", "The chat template could not render these messages: {}", e.what());
  }
  std::vector<int32_t> ids =
      model.tokenizer.encode(text, {.add_special_tokens = add_special_tokens, .parse_special = true});
  if (ids.empty()) fail_request("messages", "Invalid 'messages': the rendered conversation has no tokens.");
  return ids;
}

// Tools: the chat template's `tools` kwarg (in the request's key order), tool-call parsing of
// the answer, and for "required" or a named function the grammar that enforces the call.
nlohmann::ordered_json read_tool_use(const json& body, std::string_view raw_body, const ServedModel& model,
                                     GenerationFields& fields) {
  const std::optional<ToolRequest> tools = read_tools(body, raw_body, model.tool_format);
  if (!tools || tools->choice == ToolChoice::None) return {};
  nlohmann::ordered_json extra = {{"tools", tools->tools}};
  fields.options.tool_calls = true;
  fields.options.tool_format = model.tool_format;
  if (!tools->gbnf.empty()) {
    if (fields.request.grammar)
      fail_request("tool_choice",
                   "Invalid 'tool_choice': a required tool call cannot be combined with 'response_format' or "
                   "'grammar'.");
    if (!model.grammars) fail_request("tool_choice", "Structured outputs are not available on this server.");
    try {
      fields.request.grammar = model.grammars->get(tools->gbnf, tools->gbnf_root);
    } catch (const Error& e) {
      fail_request("tools", "Invalid 'tools': their call grammar does not compile: {}", e.what());
    }
  }
  return extra;
}

}  // namespace

nlohmann::json parse_json_body(std::string_view body) {
  json parsed;
  try {
    parsed = json::parse(body);
  } catch (const json::exception& e) {
    fail_request("", "could not parse the JSON body: {}", e.what());
  }
  if (!parsed.is_object())
    fail_request("", "could not parse the JSON body: expected a JSON object, got {}", shown(parsed));
  return parsed;
}

ParsedRequest parse_completion(const nlohmann::json& body, const ServedModel& model,
                               std::string_view raw_body) {
  require_object(body);
  const int32_t adapter = requested_adapter(body, model);
  if (const json* tools = field(body, "tools"))
    refuse_if(!tools->empty(), "tools", "tools are for /v1/chat/completions");
  GenerationFields fields = read_generation_fields(body, raw_body, model);
  fields.request.adapter = adapter;
  if (const json* v = field(body, "logprobs")) {
    fields.request.top_logprobs =
        static_cast<int32_t>(read_integer(*v, "logprobs", 0, model.limits.max_top_logprobs));
    fields.options.logprobs = true;
  }
  const MaxTokens max_tokens{read_max_tokens(body, "max_tokens"), "max_tokens", /*OpenAI's default*/ 16};
  return plan(read_prompt_list(body, "prompt", model), std::move(fields), max_tokens, "prompt", model);
}

ParsedRequest parse_chat(const nlohmann::json& body, const ServedModel& model, std::string_view raw_body) {
  require_object(body);
  const int32_t adapter = requested_adapter(body, model);
  GenerationFields fields = read_generation_fields(body, raw_body, model);
  fields.request.adapter = adapter;
  if (const json* v = field(body, "logprobs")) fields.options.logprobs = read_bool(*v, "logprobs");
  if (const json* v = field(body, "top_logprobs")) {
    const auto top = static_cast<int32_t>(read_integer(*v, "top_logprobs", 0, model.limits.max_top_logprobs));
    if (!fields.options.logprobs)
      fail_request("top_logprobs", "Invalid 'top_logprobs': it requires 'logprobs' to be true.");
    fields.request.top_logprobs = top;
  } else if (fields.options.logprobs) {
    fields.request.top_logprobs = 0;
  }
  const char* param =
      field(body, "max_completion_tokens") != nullptr ? "max_completion_tokens" : "max_tokens";
  const MaxTokens max_tokens{read_max_tokens(body, param), param, std::nullopt};
  const nlohmann::ordered_json extra = read_tool_use(body, raw_body, model, fields);
  return plan({chat_prompt(body, model, /*add_generation_prompt=*/true, /*add_special_tokens=*/false, extra)},
              std::move(fields), max_tokens, "messages", model);
}

std::vector<int32_t> parse_tokenize(const nlohmann::json& body, const ServedModel& model) {
  require_object(body);
  requested_adapter(body, model);  // any served name: they share the tokenizer
  const bool chat = field(body, "messages") != nullptr;
  bool add_special_tokens = !chat;
  if (const json* v = field(body, "add_special_tokens"))
    add_special_tokens = read_bool(*v, "add_special_tokens");
  if (chat) {
    bool add_generation_prompt = true;
    if (const json* v = field(body, "add_generation_prompt"))
      add_generation_prompt = read_bool(*v, "add_generation_prompt");
    return chat_prompt(body, model, add_generation_prompt, add_special_tokens);
  }
  const json* prompt = field(body, "prompt");
  if (prompt == nullptr) fail_request("prompt", "Missing required parameter: 'prompt' (or 'messages').");
  return model.tokenizer.encode(read_string(*prompt, "prompt"),
                                {.add_special_tokens = add_special_tokens, .parse_special = true});
}

std::vector<int32_t> parse_detokenize(const nlohmann::json& body, const ServedModel& model) {
  require_object(body);
  requested_adapter(body, model);  // any served name: they share the tokenizer
  const json* tokens = field(body, "tokens");
  if (tokens == nullptr) fail_request("tokens", "Missing required parameter: 'tokens'.");
  return read_token_ids(*tokens, "tokens", model.tokenizer);
}

EmbeddingRequest parse_embeddings(const json& body, const ServedModel& model) {
  require_object(body);
  EmbeddingRequest request;
  request.adapter = requested_adapter(body, model);
  request.model = served_name(model, request.adapter);
  request.inputs = read_prompt_list(body, "input", model);
  if (const json* format = field(body, "encoding_format")) {
    const std::string& name = read_string(*format, "encoding_format");
    if (name != "float" && name != "base64")
      fail_expected("encoding_format", "\"float\" or \"base64\"", *format);
    request.base64 = name == "base64";
  }
  if (const json* dimensions = field(body, "dimensions"))
    request.dimensions = read_integer(*dimensions, "dimensions", 1, model.hidden_size);
  if (const json* user = field(body, "user")) read_string(*user, "user");
  return request;
}

}  // namespace tokenmill
